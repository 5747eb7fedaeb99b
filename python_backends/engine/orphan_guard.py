"""Ends the vLLM engine-core processes of an engine step whose stub died without `finalize`.

vLLM's workers exit when their engine core dies (its death pipe), but the engine core does not watch the process
that started it: when Triton's stub is killed (SIGKILL, the OOM killer, a crash), the engine core lives on as an
orphan holding the memory it reserved, on the GPU ~90% of the device (`gpu_memory_utilization`), so the reload
that recovers the model (scripts/recover_engine.py) finds no memory for its new engine.

The guard is a small process started by the stub. It reads the processes to guard from a pipe whose write end only
the stub holds, so end-of-file without the word `CLOSED` first means the stub is gone; it then sends each of them
SIGTERM (vLLM's own shutdown) and, after `GRACE_S`, SIGKILL. After a clean shutdown the stub writes `CLOSED`: what
is left (multiprocessing's resource tracker, which ignores SIGTERM and ends with the stub) is not the guard's. It
runs this file by path on the standard library alone (`python -I`), so it needs nothing of the stub's environment.
Processes are named by pid and start time: a pid reused since is left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 10.0
POLL_S = 0.1
CLOSED = "CLOSED"
# /proc/<pid>/stat after the command name: 0 state, 1 parent pid, 19 start time (clock ticks after boot)
STATE, PARENT, STARTED = 0, 1, 19


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat fields after the command name (state first), or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[STARTED]) if fields else None


def children(pid: int) -> dict[int, int]:
    """{child pid: start time} of the live children of `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[PARENT] == str(pid) and fields[STATE] not in "ZX":
                found[int(entry.name)] = int(fields[STARTED])
    return found


def alive(pid: int, started: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[STATE] not in "ZX" and int(fields[STARTED]) == started


def end(targets: dict[int, int], grace_s: float = GRACE_S) -> None:
    """SIGTERM every target still alive, SIGKILL whichever outlives `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        for pid, started in targets.items():
            if alive(pid, started):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(alive(p, s) for p, s in targets.items()):
            time.sleep(POLL_S)


class OrphanGuard:
    """The stub's side: `OrphanGuard(pids)` starts the guard for them; `close()` after a clean shutdown."""

    def __init__(self, targets: dict[int, int]) -> None:
        self.process = subprocess.Popen([sys.executable, "-I", __file__], stdin=subprocess.PIPE, text=True)
        self.process.stdin.write("".join(f"{pid} {started}\n" for pid, started in targets.items()))
        self.process.stdin.flush()

    def close(self, timeout_s: float = 5) -> None:
        """After the engine's own shutdown: the guard exits and ends nothing."""
        try:
            self.process.stdin.write(f"{CLOSED}\n")
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # the guard was killed from outside: nothing to tell it, and finalize goes on
        self.process.wait(timeout=timeout_s)


def main() -> None:
    # Triton or a terminal may signal the whole process group: the guard ends only when its pipe does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lines = [line.strip() for line in sys.stdin]  # returns at end-of-file
    if CLOSED not in lines:
        end(dict(tuple(map(int, line.split())) for line in lines))


if __name__ == "__main__":
    main()
