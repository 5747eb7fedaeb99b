"""Ends the vLLM engine-core processes of an engine step whose stub died without `finalize`, and the stub itself
when its server died first.

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

The server's death is watched too. A stub whose tritonserver is killed with requests in flight does not follow it: it
waits on the dead server's shared memory, deaf to SIGTERM, with the engine core beside it holding the GPU, and the
next server start finds no memory. So when the stub's parent is gone, the guard gives the stub `STUB_GRACE_S` to
exit by itself (an idle stub does), then SIGKILLs it and ends the engine cores as above; last, once the server's other
stubs have exited (by themselves; waited for up to `SIBLINGS_GRACE_S`), it removes the shared-memory regions of that
server (the region prefix in the stub's command line) that no process maps any more, which a killed server leaves
behind (scripts/shm_regions.sh does the same at the next start). The engine cores' named
semaphores that a SIGKILL left go too. Whichever way it ends, the guard removes the directory of vLLM's sockets that
the stub named (`ipc_dir.py`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

GRACE_S = 10.0
POLL_S = 0.1
SERVER_POLL_S = 0.5  # how often the guard looks for its server
STUB_GRACE_S = 3.0  # how long a stub whose server died may take to exit by itself
SIBLINGS_GRACE_S = 20.0  # how long the guard waits for the server's other stubs before removing their regions
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


def stub_region(stub: int) -> str | None:
    """The shared-memory region a Python-backend stub was given: its command line's third word."""
    try:
        args = Path(f"/proc/{stub}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return args[2].decode() if len(args) > 2 and args[0].endswith(b"triton_python_backend_stub") else None


def server_prefix(stub: int) -> str | None:
    """What the names of one server's regions begin with (its stub's region less the UUID); None for a process that
    is not a Python-backend stub."""
    region = stub_region(stub)
    return region.rsplit("_", 1)[0] + "_" if region else None


def stubs_of(prefix: str, but: int) -> dict[int, int]:
    """The Python-backend stubs (pid: start time) whose region is named `prefix`..., other than `but`: a server's
    other steps."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != but:
            region, started = stub_region(int(entry.name)), start_time(int(entry.name))
            if region is not None and region.startswith(prefix) and started is not None:
                found[int(entry.name)] = started
    return found


def _held(shm: Path) -> set[tuple[int, int]]:
    """(device, inode) of each file under `shm` that some process maps or holds open. By inode, not name: glibc maps
    a named semaphore under the temporary name it made it by."""
    held = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                for line in (proc / "maps").read_text().splitlines():
                    fields = line.split(maxsplit=5)
                    if len(fields) == 6 and fields[5].startswith(str(shm)):
                        major, minor = fields[3].split(":")
                        held.add((os.makedev(int(major, 16), int(minor, 16)), int(fields[4])))
                for fd in (proc / "fd").iterdir():
                    try:
                        info = fd.stat()
                    except OSError:
                        continue
                    held.add((info.st_dev, info.st_ino))
            except OSError:
                continue
    return held


def _remove_unheld(paths: list[Path], shm: Path) -> list[str]:
    """Those of `paths` no process maps or holds open, removed; their names."""
    if not paths:
        return []
    held, removed = _held(shm), []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) not in held:
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def remove_unmapped(prefix: str, shm: Path = Path("/dev/shm")) -> list[str]:
    """The files of /dev/shm named `prefix`... that no process maps or holds open, removed: a region some process
    still uses (another stub of a live server) is left alone."""
    return _remove_unheld(list(shm.glob(f"{prefix}*")), shm)


def remove_semaphores_of(pids: list[int], shm: Path = Path("/dev/shm")) -> list[str]:
    """The named semaphores those ended processes made that no process has open, removed. joblib's loky names every
    multiprocessing lock of a process that imported it after that process (`sem.loky-<pid>-<random>`; vLLM's engine
    core makes two), and a process killed by SIGKILL cannot unlink its own (scripts/shm_regions.sh does the same)."""
    return _remove_unheld([path for pid in pids for path in shm.glob(f"sem.loky-{pid}-*")], shm)


class OrphanGuard:
    """The stub's side: `OrphanGuard(pids)` starts the guard for them; `close()` after a clean shutdown."""

    def __init__(self, targets: dict[int, int], ipc_dir: str = "") -> None:
        """`ipc_dir`: a directory the guard removes when it exits (vLLM's sockets, `ipc_dir.py`); none by default."""
        # the stub and its server named here, while both surely live (the guard's own start takes a moment)
        names = [str(n) for pid in (os.getpid(), os.getppid()) for n in (pid, start_time(pid))]
        self.process = subprocess.Popen([sys.executable, "-I", __file__, *names, ipc_dir], stdin=subprocess.PIPE,
                                        text=True)
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


def end_stub_of_dead_server(stub: int, stub_started: int) -> None:
    """The server is gone: the stub's own exit, or SIGKILL after STUB_GRACE_S (its pipe then ends main's wait)."""
    deadline = time.monotonic() + STUB_GRACE_S
    while time.monotonic() < deadline and alive(stub, stub_started):
        time.sleep(POLL_S)
    if alive(stub, stub_started):
        os.kill(stub, signal.SIGKILL)


def main() -> None:
    # Triton or a terminal may signal the whole process group: the guard ends only when its pipe does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stub, stub_started, server, server_started = map(int, sys.argv[1:5])
    ipc_dir = sys.argv[5]
    prefix = server_prefix(stub)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.strip() for line in sys.stdin), daemon=True)
    reader.start()  # returns at end-of-file: the stub closed the pipe, or died
    server_died, siblings = False, {}
    while reader.is_alive():
        reader.join(SERVER_POLL_S)
        if reader.is_alive() and not server_died and not alive(server, server_started):
            server_died = True
            siblings = stubs_of(prefix, stub) if prefix else {}
            end_stub_of_dead_server(stub, stub_started)
    if CLOSED not in lines:
        targets = dict(tuple(map(int, line.split())) for line in lines)
        end(targets)
        remove_semaphores_of(list(targets))  # what a SIGKILL past the grace left
    if server_died and prefix:
        # The server's other stubs exit by themselves, slower on a busy host: a region still mapped when the guard
        # looks would stay in /dev/shm until the next start, so their end is waited for (bounded) first.
        deadline = time.monotonic() + SIBLINGS_GRACE_S
        while time.monotonic() < deadline and any(alive(pid, started) for pid, started in siblings.items()):
            time.sleep(POLL_S)
        remove_unmapped(prefix)
    if ipc_dir:  # after the engine cores' end: nothing binds or connects to its sockets any more
        shutil.rmtree(ipc_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
