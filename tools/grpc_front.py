"""Run the gRPC front that docker-compose.yml and the Helm chart put before Triton's gRPC port
(deploy/helm/reranker/files/grpc-front.conf.template) with this machine's nginx, in front of a server started here:
what tests/deploy/test_grpc_front.py and benchmarks/grpc_front_memory.py run, and a way to try the front without a
container.

    python -m tools.grpc_front --triton 127.0.0.1:8001 --port 9001

The template is filled in as the nginx images' entrypoint fills it in (${NAME} from the environment), inside a
minimal nginx.conf of its own folder, so nothing of the system's nginx configuration is used or changed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.local_server import free_port

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "deploy" / "helm" / "reranker" / "files" / "grpc-front.conf.template"
START_TIMEOUT_S = 10.0

MAIN_CONF = """\
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{}}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    include {folder}/front.conf;
}}
"""


@dataclass(frozen=True)
class RunningFront:
    address: str  # host:port a gRPC client connects to
    process: subprocess.Popen  # nginx's master (its worker is its child)

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()] if self.process.poll() is None else []


def render(port: int, triton_address: str, max_message_bytes: int) -> str:
    """The template with its three settings filled in."""
    return string.Template(TEMPLATE.read_text()).substitute(
        GRPC_FRONT_PORT=port, TRITON_GRPC_ADDRESS=triton_address, GRPC_MAX_MESSAGE_BYTES=max_message_bytes)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def running_front(triton_address: str, max_message_bytes: int, port: int | None = None,
                  folder: Path | None = None) -> Iterator[RunningFront]:
    """nginx with the front in front of `triton_address`, on `port` (a free loopback port when None); stopped
    gracefully (requests in flight finish) on the way out."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if nginx is None:
        raise RuntimeError("nginx is not installed: bash deploy/install_tools.sh installs it (Debian's nginx-light)")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(folder or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        (folder / "front.conf").write_text(render(port, triton_address, max_message_bytes))
        (folder / "nginx.conf").write_text(MAIN_CONF.format(folder=folder))
        with (folder / "stderr.log").open("w") as stderr:
            process = subprocess.Popen([nginx, "-p", str(folder), "-c", str(folder / "nginx.conf")],
                                       stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _listening(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    logs = [folder / "stderr.log", folder / "error.log"]
                    raise RuntimeError("nginx did not start: " + "".join(p.read_text() for p in logs if p.exists()))
                time.sleep(0.05)
            yield RunningFront(f"127.0.0.1:{port}", process)
        finally:
            _stop(process)


def _stop(process: subprocess.Popen) -> None:
    """SIGQUIT, nginx's graceful stop; past 30 s its whole process group (its own session: the master, not yet
    reaped, still holds the group's number), then the master reaped."""
    if process.poll() is None:
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton", required=True, help="host:port of Triton's gRPC endpoint")
    ap.add_argument("--port", type=int, required=True, help="the front's port")
    ap.add_argument("--max-message-bytes", type=int, default=68157440,
                    help="the largest request (default: what the shipped GPU limits admit)")
    ap.add_argument("--folder", type=Path, help="where its configuration and logs go (default: a temporary folder)")
    args = ap.parse_args(argv)
    with running_front(args.triton, args.max_message_bytes, args.port, args.folder) as front:
        print(f"the gRPC front listens on {front.address}, in front of {args.triton}; Ctrl-C stops it", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
