"""Start the real tritonserver (scripts/start_server.sh) on free ports for a test session, and stop it."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from python_backends.engine.ipc_dir import remove_ipc_dirs
from python_backends.engine.orphan_guard import alive, remove_semaphores_of, server_prefix, start_time
from python_backends.model_repository import (
    ENGINE, ENGINE_CONFIG, ENSEMBLE, PREPROCESS, REPOSITORY, config_path, copy_with_variant, read_config, set_parameters,
    variant_file, write_config,
)
from reranker_client import RerankClient
from tests.support.loading import one_load_at_a_time
from tests.support.otlp import PATH as OTLP_PATH
from tests.support.shared_memory import LEDGER
from tools.local_server import free_port, http_ok

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = float(os.environ.get("TRITON_START_TIMEOUT_S", "300"))
START_ATTEMPTS = 3


UNKNOWN_STATUS = -(1 << 16)  # exit_status of a server that another process started and that has ended


# the config variant copy_repository writes for a test's changed parameters (tritonserver --model-config-name)
TEST_VARIANT = "test"


@dataclass
class RunningServer:
    http_url: str
    grpc_url: str
    metrics_url: str
    log_path: Path
    admin_key: str  # of the restricted control APIs (model repository, shared memory, trace, logging)
    pid: int
    started: int  # its start time (clock ticks after boot): with the pid, what names this process and no other
    process: subprocess.Popen | None = None  # None when another process started it (the run's shared server)
    left_behind: list[str] = field(default_factory=list)  # /dev/shm files its group left, removed by stop_server
    traces_url: str = ""  # where it exports its traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), "" when off

    def url(self, protocol: str) -> str:
        return self.grpc_url if protocol == "grpc" else self.http_url

    def ports(self) -> dict[str, int]:
        """Its ports by start_server.sh's names."""
        return {name: int(url.rsplit(":", 1)[1]) for name, url in
                (("HTTP_PORT", self.http_url), ("GRPC_PORT", self.grpc_url), ("METRICS_PORT", self.metrics_url))}

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def is_alive(self) -> bool:
        return self.exit_status() is None

    def exit_status(self) -> int | None:
        """None while the server runs, else its exit status as Popen gives it (-N: ended by signal N). The server is
        never reaped here: until stop_server reaps it, its pid, and so its process group's id, cannot be given to
        another process, so a signal to the group can only reach what this server started."""
        if self.process is None:
            return None if alive(self.pid, self.started) else UNKNOWN_STATUS
        if self.process.returncode is not None:
            return self.process.returncode
        try:
            info = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped by someone else: its group's id may be another's now
            raise RuntimeError(f"tritonserver {self.process.pid} was reaped outside stop_server") from None
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def wait_exit(self, timeout_s: float) -> int:
        """Waits up to timeout_s for the server to end (not reaping it) and returns its exit status."""
        deadline = time.monotonic() + timeout_s
        while (status := self.exit_status()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"tritonserver {self.pid}", timeout_s)
            time.sleep(0.1)
        return status

    def ending(self) -> str:
        """How the server ended and the error lines of its log: what a failure caused by its end should show."""
        status = self.exit_status()
        if status is None:
            return f"tritonserver {self.pid} is running"
        if status == UNKNOWN_STATUS:
            how = "has ended (its exit status is its starter's)"
        elif status < 0:
            how = f"was killed by {signal.Signals(-status).name}"
        else:
            how = f"exited with status {status}"
        lines = self.log_path.read_text(errors="replace").splitlines()
        errors = [line for line in lines if line.startswith(("E", "terminate", "  what()")) or "Traceback" in line
                  or "Error" in line]
        return (f"tritonserver ({self.log_path}) {how}; its log's error lines:\n" + "\n".join(errors[-20:])
                + "\n---- its log's last lines:\n" + "\n".join(lines[-15:]))


def start_server(log_path: Path, model_repository: Path | None = None, extra_args: tuple[str, ...] = (),
                 traced: bool = False) -> RunningServer:
    """tritonserver on free loopback ports, ready (HTTP readiness, and the metrics port open); `traced`: exporting
    traces to a free port of its own (for an OTLP receiver a test starts there). Another process can still take a port
    in the minute before the server binds it: such a start is made again on other ports."""
    with one_load_at_a_time():
        for _ in range(START_ATTEMPTS - 1):
            try:
                return _start_once(log_path, model_repository, extra_args, traced)
            except PortTaken:
                pass
        return _start_once(log_path, model_repository, extra_args, traced)


class PortTaken(RuntimeError):
    """The server exited because one of its ports was taken before it bound it."""


def _start_once(log_path: Path, model_repository: Path | None, extra_args: tuple[str, ...],
                traced: bool) -> RunningServer:
    ports = {"HTTP_PORT": free_port(), "GRPC_PORT": free_port(), "METRICS_PORT": free_port()}
    admin_key = secrets.token_urlsafe(16)
    env = dict(os.environ, TRITON_ADMIN_KEY=admin_key, RUN_DIR=str(log_path.parent),  # its pid file goes beside the log
               **{key: str(value) for key, value in ports.items()})
    traces_url = f"http://127.0.0.1:{free_port()}{OTLP_PATH}" if traced else ""
    if traced:  # spans leave within half a second of their end (Triton's and the engine step's batching)
        env.update(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=traces_url, OTEL_BSP_SCHEDULE_DELAY="500")
    if model_repository is not None:
        env["MODEL_REPOSITORY"] = str(model_repository)
    log = log_path.open("w")
    process = subprocess.Popen(
        [str(ROOT / "scripts" / "start_server.sh"), *extra_args],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    server = RunningServer(
        http_url=f"127.0.0.1:{ports['HTTP_PORT']}",
        grpc_url=f"127.0.0.1:{ports['GRPC_PORT']}",
        metrics_url=f"127.0.0.1:{ports['METRICS_PORT']}",
        log_path=log_path,
        admin_key=admin_key,
        pid=process.pid,
        started=start_time(process.pid),  # its child: the pid is its own until it is reaped
        process=process,
        traces_url=traces_url,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not server.is_alive():
            ending = server.ending()
            stop_server(server)  # what its group left (stubs, vLLM's processes and segments) goes with it
            failure = PortTaken if "already in use" in server.log_tail() else RuntimeError
            raise failure(f"while starting: {ending}")
        # Triton opens its metrics port last, after the HTTP one answers (41 ms later once on two busy cores): a test
        # that reads the metrics at once found it closed
        if http_ok(f"http://{server.http_url}/v2/health/ready") and http_ok(f"http://{server.metrics_url}/metrics"):
            return server
        time.sleep(0.5)
    stop_server(server)
    raise RuntimeError(f"tritonserver not ready after {START_TIMEOUT_S:.0f}s:\n{server.log_tail()}")


def signal_stop(server: RunningServer) -> None:
    """SIGTERM to the server and its Python stubs, as scripts/stop_server.sh sends it: Triton drains in-flight
    requests and the engine step, told by its stub, refuses what has not reached vLLM (engine/stopping.py). vLLM's
    own processes are left to the steps' unload: a SIGTERM would abort the requests they hold."""
    group = server.process.pid
    for pid in [group, *(pid for pid in group_pids(group) if _is_stub(_arguments(pid)))]:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass  # ended since it was listed


def _arguments(pid: int) -> list[str]:
    """A process's command line, or [] once it has ended."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _is_stub(arguments: list[str]) -> bool:
    return bool(arguments) and arguments[0].endswith("triton_python_backend_stub")


def stop_server(server: RunningServer, timeout_s: float = 60) -> int:
    """SIGTERM to the server and its stubs (`signal_stop`), then SIGKILL the process group if it hangs. Whatever of the
    group outlives the server is killed too: the vLLM EngineCore and Worker processes of a stub that was killed
    (the fault tests) or of a server that aborted are orphaned, ~1 GB each, and piled up run after run. The group is
    signalled only while its leader, the server, is not yet reaped (running, or a zombie that exit_status left
    unreaped), so the group id cannot have been given to another process. Then the shared-memory files the group
    held and left behind (a killed stub's region, vLLM's segments of an engine that died by a signal) are removed and
    listed in `server.left_behind`."""
    LEDGER.sample()  # what the group holds right now, e.g. the region of an engine reloaded a moment ago
    group = server.process.pid
    if server.process.returncode is None:
        if server.is_alive():
            signal_stop(server)
            try:
                server.wait_exit(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        members = group_pids(group)  # whose semaphores to look for once they are killed
        prefixes = {server_prefix(pid) for pid in members} - {None}  # whose socket directories to remove, likewise
        try:
            os.killpg(group, signal.SIGKILL)  # the leader is unreaped: the group is still this server's
        except ProcessLookupError:
            pass  # nothing was left
        server.process.wait()
        # vLLM's engine core, left running by a stop (it ends with its stub's unload), cannot unlink its named
        # semaphores once killed: removed as scripts/stop_server.sh removes them
        remove_semaphores_of(members)
        for prefix in prefixes:  # an engine's guard, killed with the group, could not remove its engine's
            remove_ipc_dirs(prefix)
    server.left_behind = LEDGER.remove_left_behind(group=group)
    # start_server.sh's pid file for scripts/stop_server.sh, which names a server that is gone now
    (server.log_path.parent / f"server-{server.http_url.rsplit(':', 1)[1]}.pid").unlink(missing_ok=True)
    return server.process.returncode


def group_pids(pgid: int) -> list[int]:
    """The live processes of a process group (read from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in "ZX" and int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return pids


def stub_pids(server: RunningServer, model: str) -> list[int]:
    """Python-backend stub processes of one model of this server (start_server.sh execs tritonserver, so the
    Popen pid is the server's; each stub's command line names its model.py and the server's pid)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        args = _arguments(int(proc.name))
        if _is_stub(args) and len(args) > 1 and args[1].endswith(f"{model}/1/model.py") and str(server.pid) in args:
            pids.append(int(proc.name))
    return pids


def copy_repository(destination: Path, parameters: dict[tuple[str, str], str] | None = None,
                    variant: str = TEST_VARIANT) -> Path:
    """A copy of model_repository/ where each model has `configs/<variant>.pbtxt`: its config.pbtxt with the changed
    string parameters ({(model, key): value}). Start the server on it with `--model-config-name=<variant>`."""
    return copy_with_variant(destination, variant, parameters=parameters)


WINDOW_ENSEMBLE = "reranker_window"


def window_repository(folder: Path) -> Path:
    """A second model repository for the shared test server: `reranker_window`, the default ensemble with its
    preprocess step in window mode (`rerank_preprocess_window`, rerank_preprocess's config and model.py with
    long_documents "window"), sharing the server's engine and calibrate step. A test of window mode sends requests
    to it instead of starting a server of its own."""
    preprocess = read_config(config_path(REPOSITORY, PREPROCESS))
    preprocess.name = f"{PREPROCESS}_window"
    # the server's own engine, in the default repository
    # 128 documents of up to 8 windows each: the most sequences the server's engine takes in one request
    set_parameters(preprocess, {"long_documents": "window", "max_documents": "128",
                                ENGINE_CONFIG: str(variant_file(REPOSITORY, ENGINE))})
    write_config(variant_file(folder, preprocess.name), preprocess)
    (folder / preprocess.name / "1").mkdir(exist_ok=True)
    shutil.copyfile(REPOSITORY / PREPROCESS / "1" / "model.py", folder / preprocess.name / "1" / "model.py")
    ensemble = read_config(config_path(REPOSITORY, ENSEMBLE))
    ensemble.name = WINDOW_ENSEMBLE
    for step in ensemble.ensemble_scheduling.step:
        if step.model_name == PREPROCESS:
            step.model_name = preprocess.name
    write_config(variant_file(folder, WINDOW_ENSEMBLE), ensemble)
    (folder / WINDOW_ENSEMBLE / "1").mkdir(exist_ok=True)  # an ensemble needs a version folder
    return folder


def start_test_server(log_path: Path) -> RunningServer:
    """A server on the default model repository and the window repository beside it (the shared test server),
    tracing the requests that carry a trace context (tests/integration/test_tracing.py receives them)."""
    window = window_repository(log_path.parent / "window_repository")
    return start_server(log_path, extra_args=(f"--model-repository={window}",), traced=True)


# The probe pair of the fault and lifecycle tests: the relevant document is sent second, so a right answer is [1, 0].
PROBE_QUERY, PROBE_DOCUMENTS = "What is the capital of France?", ["Bananas are yellow.", "Paris is the capital of France."]


def probe_ranking(server: RunningServer) -> list[int]:
    """The document indices of the probe pair in the server's order, over gRPC."""
    client = RerankClient(server.grpc_url, protocol="grpc")
    try:
        return [r.index for r in client.rerank(PROBE_QUERY, PROBE_DOCUMENTS).results]
    finally:
        client.close()


def model_stats(server: RunningServer, model: str) -> dict:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats") as response:
        return json.load(response)["model_stats"][0]


def shared_batches(stats: dict) -> int:
    """How many batches of two requests or more the model has run, by its batch statistics (Triton records a batch
    once the stub has answered it: read right after the answers, the count can still miss the last batch)."""
    return sum(int(b["compute_infer"]["count"]) for b in stats.get("batch_stats", []) if int(b["batch_size"]) >= 2)


def rounds_until_batched(server: RunningServer, model: str, send_round: Callable[[], None], inferences: int,
                         most: int) -> tuple[list[int], bool]:
    """Runs `send_round` (it sends concurrent requests and checks their answers) until a round has run a batch of two
    requests or more in `model`, at most `most` times: each round's new inference count and whether one batched.
    A step batches only what reaches it within its queue delay, and public requests reach the engine and calibrate
    steps one at a time, as the preprocess step's tokenizing thread answers them: a round of concurrent requests can
    run every request alone (10-50% of rounds of 9 here; 1 burst of 24 in 40)."""
    counts: list[int] = []
    while len(counts) < most:
        before = model_stats(server, model)
        send_round()
        after = stats_after(server, model, before, inferences)
        counts.append(after["inference_count"] - before["inference_count"])
        if shared_batches(after) > shared_batches(before):
            return counts, True
    return counts, False


def stats_after(server: RunningServer, model: str, before: dict, inferences: int, timeout_s: float = 10) -> dict:
    """The step's statistics once it has counted `inferences` more requests than `before`, or when timeout_s is up.
    The Python backend records a batch's statistics after the stub has sent its responses, so a client can hold the
    last answer before the count includes it (CI once read 23 of 24)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = model_stats(server, model)
        if stats["inference_count"] - before["inference_count"] >= inferences or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)
