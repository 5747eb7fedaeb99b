"""The removal of the named semaphores a killed server's processes leave in /dev/shm, by scripts/shm_regions.sh (after a
stop that had to SIGKILL) and by the engine step's orphan guard (after it SIGKILLed an engine core): those of the given
ended processes go, one a live process has open stays."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from python_backends.engine import orphan_guard

ROOT = Path(__file__).resolve().parents[2]
# A process that has imported joblib (as vLLM's engine core has, beside the engine step's code) names its locks after
# itself; it makes one, says its name and waits.
HOLDER = """
import sys, time, multiprocessing
import joblib.externals.loky.backend  # renames the multiprocessing locks made from here on
lock = multiprocessing.get_context("spawn").Lock()
print(lock._semlock.name, flush=True)
time.sleep(60)
"""


def holder() -> tuple[subprocess.Popen, Path]:
    """In a process group of its own, as a server's processes are: multiprocessing's resource tracker, the holder's
    child, unlinks what a killed holder leaves unless the tracker is killed with it."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    name = process.stdout.readline().strip()
    return process, Path("/dev/shm") / f"sem.{name.lstrip('/')}"


def by_script(*pids: int) -> None:
    subprocess.run(["bash", "-c", f'. "{ROOT}/scripts/shm_regions.sh"; remove_semaphores_of "$@"', "-",
                    *map(str, pids)], check=True, timeout=30)


def by_guard(*pids: int) -> None:
    orphan_guard.remove_semaphores_of(list(pids))


@pytest.mark.parametrize("remove_semaphores_of", [by_script, by_guard])
def test_a_killed_process_semaphores_go_and_an_open_one_stays(remove_semaphores_of):
    (killed, left), (live, held) = holder(), holder()
    try:
        assert left.name.startswith(f"sem.loky-{killed.pid}-") and held.name.startswith(f"sem.loky-{live.pid}-")
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=10)
        assert left.exists()  # a process killed cannot unlink its own
        remove_semaphores_of(killed.pid, live.pid)
        assert (left.exists(), held.exists()) == (False, True)
    finally:
        for process in (killed, live):
            if process.returncode is None:  # not reaped: its number, and so its group's, is still its own
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        left.unlink(missing_ok=True)
        held.unlink(missing_ok=True)
