"""Which /dev/shm files the test run's processes held, and removing those they left behind.

Triton's Python backend gives each stub a region (`triton_reranker_<port>_<uuid>` from scripts/start_server.sh, else
`triton_python_backend_shm_region_<uuid>`), vLLM's engine holds `psm_<id>` segments and named semaphores (`sem.*`). A
process that ends by a signal (a stub the fault tests kill, a server that aborts, a group killed at stop) cannot unlink
them: they stay in /dev/shm, with their memory, until the machine restarts. A file counts as this run's when a process
descended from the test process held it (mapped or open) while the run sampled it, never by its name or age alone: other
runs and servers on the machine keep theirs, and a file anyone still holds is never removed.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

SHM = Path("/dev/shm")
PREFIXES = ("triton_reranker_", "triton_python_backend_shm_region_", "psm_", "sem.")
SAMPLE_EVERY_S = 1.0


def _names(paths: list[str]) -> set[str]:
    prefix = f"{SHM}/"
    return {
        path[len(prefix):] for path in paths
        if path.startswith(prefix) and not path.endswith(" (deleted)") and path[len(prefix):].startswith(PREFIXES)
    }


def held_by(pid: int) -> set[str]:
    """The /dev/shm files of interest that `pid` maps or has open (empty once it has ended)."""
    proc = Path("/proc") / str(pid)
    try:
        mapped = [line.split(maxsplit=5)[5] for line in (proc / "maps").read_text().splitlines()
                  if str(SHM) in line and len(line.split(maxsplit=5)) == 6]
        opened = []
        for fd in (proc / "fd").iterdir():
            try:
                opened.append(os.readlink(fd))
            except OSError:
                continue
    except OSError:
        return set()
    return _names(mapped + opened)


def _parents() -> dict[int, int]:
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                # the fields after the command name, which may itself hold spaces and parentheses
                parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in _parents().items():
        children[parent].append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children[todo.pop()]:
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def held_by_anyone() -> set[str]:
    return set().union(*(held_by(pid) for pid in _parents()))


class Ledger:
    """The files each process group of the run was seen holding, sampled every SAMPLE_EVERY_S in the background
    (a region a reload creates lives seconds at least) and whenever a helper asks, e.g. right before a stop."""

    def __init__(self) -> None:
        self._seen: dict[str, set[int]] = defaultdict(set)  # file name -> process groups seen holding it
        self._holder: dict[str, str] = {}  # file name -> command line of the first process seen holding it
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        for pid in descendants(os.getpid()):
            names = held_by(pid)
            try:
                group = os.getpgid(pid)
            except ProcessLookupError:
                continue
            with self._lock:
                for name in names:
                    self._seen[name].add(group)
                    self._holder.setdefault(name, f"{command_line(pid)} [process group {group}]")

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="shared-memory-ledger", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.sample()

    def left_behind(self, group: int | None = None, settle_s: float = 10.0) -> list[str]:
        """The files (seen held by `group`, or by any group of the run) that still exist and that no process holds.
        With a group, first waits up to `settle_s` for its processes to end (a SIGKILLed group goes within ms)."""
        with self._lock:
            ours = {name for name, groups in self._seen.items() if group is None or group in groups}
        deadline = time.monotonic() + settle_s
        while group is not None and _group_holds(group, ours) and time.monotonic() < deadline:
            time.sleep(0.1)
        existing = {name for name in ours if (SHM / name).exists()}
        return sorted(existing - held_by_anyone())

    def groups(self) -> set[int]:
        with self._lock:
            return set().union(*self._seen.values())

    def remove_left_behind(self, group: int | None = None, settle_s: float = 10.0) -> list[str]:
        """Unlinks what `left_behind` finds; returns the names, each with the command line and process group of the
        process first seen holding it (which program left it)."""
        names = self.left_behind(group, settle_s)
        for name in names:
            (SHM / name).unlink(missing_ok=True)
        with self._lock:
            return [f"{name} (held by: {self._holder.get(name, '?')})" for name in names]


def command_line(pid: int) -> str:
    try:
        args = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    return " ".join(args)[:160]


def _group_holds(group: int, names: set[str]) -> bool:
    for pid in _parents():
        try:
            if os.getpgid(pid) == group and held_by(pid) & names:
                return True
        except ProcessLookupError:
            continue
    return False


# One per test process (each xdist worker has its own): tests/conftest.py starts it and checks it at the end,
# tests.support.triton_server.stop_server cleans up after each server's group.
LEDGER = Ledger()
