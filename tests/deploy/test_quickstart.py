"""scripts/quickstart.sh and scripts/stop_server.sh as a new user meets them: the quickstart fails with exit 1, the
reason and the end of the server's log when the server exits (a broken model configuration) or is not ready in
time, and leaves no process behind; against a server that is up it answers the example request and ends with the
ports, the log and the stop command; stop_server.sh says what it did.

The failing starts stay short: the broken model is rerank_engine, so no vLLM engine starts; the start that does not
finish is a Python model that never ends its initialize, stopped at a START_TIMEOUT_S of 3 s."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from python_backends.engine.orphan_guard import start_time
from python_backends.model_repository import (
    CALIBRATE, ENGINE, ENGINE_CONFIG, PREPROCESS, REPOSITORY, read_config, set_parameters, variant_file, write_config,
)
from tools.local_server import free_port, http_ok
from tests.support.triton_server import RunningServer, group_pids
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scripts" / "quickstart.sh"
START = REPO / "scripts" / "start_server.sh"
STOP = REPO / "scripts" / "stop_server.sh"


def run_quickstart(run_dir: Path, timeout_s: float, **env: str) -> subprocess.CompletedProcess:
    ports = {"HTTP_PORT": str(free_port()), "GRPC_PORT": str(free_port()), "METRICS_PORT": str(free_port())}
    return subprocess.run(
        ["bash", str(QUICKSTART)], capture_output=True, text=True, timeout=timeout_s,
        env={**os.environ, **ports, "RUN_DIR": str(run_dir), "TRITON_ADMIN_KEY": "test", **env},
    )


def process_group_alive(pgid: int) -> bool:
    """Whether a live process is in the group (read from /proc: nothing is signalled)."""
    return bool(group_pids(pgid))


def started_pid(output: str) -> int:
    """The server's pid (its process group), as the quickstart reports it."""
    match = re.search(r"\] +pid (\d+); waiting until it is ready", output)
    assert match, output
    return int(match.group(1))


def test_quickstart_fails_with_the_log_when_the_model_configs_are_broken(tmp_path):
    """Every step's config.pbtxt is broken, so no model loads and the server exits at once."""
    repository = tmp_path / "model_repository"
    subprocess.run(["cp", "-r", str(REPO / "model_repository"), str(repository)], check=True)
    for config in repository.glob("*/config.pbtxt"):
        config.write_text("this is not a model configuration\n")
    proc = run_quickstart(tmp_path / "run", 180, MODEL_REPOSITORY=str(repository))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = tmp_path / "run" / "server.log"
    assert "FAILED: tritonserver exited before it was ready" in proc.stdout, proc.stdout
    errors, tail = proc.stdout.split(f"---- error lines of {log}", 1)[1].split(f"---- last 40 lines of {log} ----\n")
    assert (f"\"Poll failed for model directory 'rerank_engine': failed to read text proto from "
            f"{repository / 'rerank_engine' / 'config.pbtxt'}\"") in errors, errors
    assert "error: creating server: Internal - failed to load all models" in errors
    assert tail.endswith("error: creating server: Internal - failed to load all models\n----\n"), tail
    assert not process_group_alive(started_pid(proc.stdout))
    assert not list((tmp_path / "run").glob("server-*.pid"))
    assert "calibration profile" not in proc.stdout  # the example never ran


HUNG_MODEL = """
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(3600)  # a start that never ends: Triton's loader waits for it, no port opens
"""


def hung_repository(folder: Path) -> Path:
    """A model repository of one Python model whose initialize never returns."""
    model = folder / "hung"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(HUNG_MODEL)
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\ninput [{ name: "IN", data_type: TYPE_FP32, dims: [1] }]\n'
        'output [{ name: "OUT", data_type: TYPE_FP32, dims: [1] }]\n')
    return folder


def test_quickstart_fails_when_the_server_is_not_ready_in_time_and_stops_it(tmp_path):
    """A Python model whose initialize never returns holds Triton's start for good: start_server.sh stops the whole
    group at START_TIMEOUT_S and says why in the log, and the quickstart reports it and leaves nothing running."""
    repository = hung_repository(tmp_path / "repository")
    proc = run_quickstart(tmp_path / "run", 120, START_TIMEOUT_S="3", MODEL_REPOSITORY=str(repository))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: tritonserver exited before it was ready" in proc.stdout, proc.stdout
    errors = proc.stdout.split("---- error lines of", 1)[1].split("---- last 40 lines of", 1)[0]
    assert "error: tritonserver not ready after 3 s (START_TIMEOUT_S): stopping it" in errors, errors
    assert f"---- last 40 lines of {tmp_path / 'run' / 'server.log'} ----" in proc.stdout
    assert not process_group_alive(started_pid(proc.stdout))
    assert not list((tmp_path / "run").glob("server-*.pid"))


def test_a_start_stopped_at_its_timeout_leaves_no_shared_memory(tmp_path):
    """start_server.sh alone (as a container or a unit file runs it): the group it kills at START_TIMEOUT_S leaves
    the stub's region behind, which it removes from outside the group once nothing maps it."""
    ports = {"HTTP_PORT": str(free_port()), "GRPC_PORT": str(free_port()), "METRICS_PORT": str(free_port())}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "start_server.sh")], capture_output=True, text=True, timeout=60,
        env={**os.environ, **ports, "RUN_DIR": str(tmp_path), "TRITON_ADMIN_KEY": "test", "START_TIMEOUT_S": "3",
             "MODEL_REPOSITORY": str(hung_repository(tmp_path / "repository"))})
    # ended by the SIGTERM, by the SIGKILL after it, or by itself on the SIGTERM ("failed to load all models")
    assert proc.returncode in (-signal.SIGTERM, -signal.SIGKILL, 1), (proc.returncode, proc.stderr[-600:])
    assert "error: tritonserver not ready after 3 s (START_TIMEOUT_S): stopping it" in proc.stderr
    regions = f"triton_reranker_{ports['HTTP_PORT']}_*"
    assert wait_until(lambda: not list(Path("/dev/shm").glob(regions)), timeout_s=10), list(Path("/dev/shm").glob(regions))


def test_quickstart_against_a_running_server_answers_and_says_where_everything_is(server: RunningServer, tmp_path):
    http_port, grpc_port = server.http_url.rsplit(":", 1)[1], server.grpc_url.rsplit(":", 1)[1]
    metrics_port = server.metrics_url.rsplit(":", 1)[1]
    proc = run_quickstart(tmp_path, 120, HTTP_PORT=http_port, GRPC_PORT=grpc_port, METRICS_PORT=metrics_port)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"a server already answers on localhost:{http_port}: using it" in proc.stdout
    ranking = re.findall(r"^  #(\d)  score=", proc.stdout, re.MULTILINE)
    assert ranking == ["1", "2"], proc.stdout  # Paris first, then France's borders
    summary = proc.stdout[proc.stdout.index("done. The server keeps running:"):]
    assert f"  HTTP     http://localhost:{http_port}" in summary
    assert f"  gRPC     localhost:{grpc_port}" in summary
    assert f"  metrics  http://localhost:{metrics_port}/metrics" in summary
    assert summary.endswith(f"  log, stop: not started from {tmp_path}; those of whatever started it\n"), summary


def test_stop_server_leaves_a_process_that_took_the_servers_pid_alone(tmp_path):
    """The pid file names a process that has ended; its pid now belongs to another (here: the same pid with another
    start time, as after the kernel gave the number again)."""
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        (tmp_path / "server-8000.pid").write_text(f"{other.pid} 1\n")
        proc = subprocess.run(["bash", str(STOP)], capture_output=True, text=True,
                              env={**os.environ, "RUN_DIR": str(tmp_path)})
        assert proc.stdout == f"stop_server: tritonserver (pid {other.pid}) was not running\n"
        assert other.poll() is None
        assert not (tmp_path / "server-8000.pid").exists()
    finally:
        other.kill()
        other.wait()


def test_stop_server_says_when_there_is_nothing_to_stop(tmp_path):
    proc = subprocess.run(["bash", str(STOP)], capture_output=True, text=True, env={**os.environ, "RUN_DIR": str(tmp_path)})
    assert proc.returncode == 0
    assert proc.stdout == f"stop_server: no {tmp_path}/server-*.pid, so no server started by scripts/start_server.sh to stop\n"


def test_stop_server_stops_the_process_group_it_names(tmp_path):
    """A stand-in process group (a shell and a child that ends with it, as Triton's stubs end with their server), so
    that the test starts no server. A thread reaps the shell as soon as it exits, as init does for quickstart's server:
    a zombie would still count as the group."""
    child = "import os, sys, time\nwhile os.getppid() == int(sys.argv[1]):\n    time.sleep(0.1)"  # the shell's pid
    group = subprocess.Popen(["bash", "-c", f"{sys.executable} -c '{child}' $$ & wait"], start_new_session=True)
    threading.Thread(target=group.wait, daemon=True).start()
    (tmp_path / "server-8000.pid").write_text(f"{group.pid} {start_time(group.pid)}\n")
    proc = subprocess.run(["bash", str(STOP)], capture_output=True, text=True, env={**os.environ, "RUN_DIR": str(tmp_path)})
    stopped = rf"stop_server: stopping tritonserver \(pid {group.pid}\) \.\.\.\nstop_server: stopped in \d+\.\d s\n"
    assert re.fullmatch(stopped, proc.stdout), proc.stdout  # ended by the SIGTERM, not killed after the grace time
    assert not process_group_alive(group.pid)
    assert not (tmp_path / "server-8000.pid").exists()


def test_stop_server_stops_a_server_start_server_started_in_the_background(tmp_path):
    """start_server.sh from a script's background (it shares its parent's process group) makes a group of its own and
    writes its pid file; stop_server.sh then ends the whole group, Python stubs included, within its grace time.
    The server holds the two steps without an engine, which start in seconds: vLLM's engine-core process is one more
    child of a stub in the same group."""
    repository = tmp_path / "repository"
    engine_file = tmp_path / "engine" / "config.pbtxt"  # the model the steps read, outside the repository: not loaded
    engine_file.parent.mkdir()
    shutil.copyfile(variant_file(REPOSITORY, ENGINE), engine_file)
    for step in (PREPROCESS, CALIBRATE):
        shutil.copytree(REPOSITORY / step, repository / step, ignore=shutil.ignore_patterns("__pycache__"))
        config = read_config(variant_file(repository, step))
        set_parameters(config, {ENGINE_CONFIG: str(engine_file)})
        write_config(variant_file(repository, step), config)
    ports = {"HTTP_PORT": str(free_port()), "GRPC_PORT": str(free_port()), "METRICS_PORT": str(free_port())}
    env = {**os.environ, **ports, "RUN_DIR": str(tmp_path), "TRITON_ADMIN_KEY": "test",
           "MODEL_REPOSITORY": str(repository)}
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(["bash", str(START)], stdout=log, stderr=subprocess.STDOUT, env=env)
    threading.Thread(target=server.wait, daemon=True).start()  # reaped at once, as init reaps a server whose shell left
    try:
        deadline = time.monotonic() + 240
        while not http_ok(f"http://127.0.0.1:{ports['HTTP_PORT']}/v2/health/ready"):
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        pid_file = tmp_path / f"server-{ports['HTTP_PORT']}.pid"
        assert pid_file.read_text() == f"{server.pid} {start_time(server.pid)}\n"
        stubs = [pid for pid in group_pids(server.pid) if pid != server.pid]
        assert len(stubs) == 2, stubs  # preprocess and calibrate each run in a stub of the server's group
        proc = subprocess.run(["bash", str(STOP)], capture_output=True, text=True,
                              env={**os.environ, "RUN_DIR": str(tmp_path), "HTTP_PORT": ports["HTTP_PORT"]})
        assert re.fullmatch(rf"stop_server: stopping tritonserver \(pid {server.pid}\) \.\.\.\n"
                            r"stop_server: stopped in \d+\.\d s\n", proc.stdout), proc.stdout
        assert not process_group_alive(server.pid)
        assert not pid_file.exists()
    finally:  # a failed assertion leaves no server: the script stops it only while its pid file still names it
        subprocess.run(["bash", str(STOP)], capture_output=True, env={**os.environ, "RUN_DIR": str(tmp_path), "GRACE_S": "5"})
