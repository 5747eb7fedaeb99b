"""The last lines of scripts/test.sh: each phase's wall time, each pass's counts, and whatever the run left behind
(processes it started that still run, files in /dev/shm with their owners, directories of vLLM's sockets).

    python -m tests.support.run_summary --setup-s 80 --parallel-s 500 --alone-s 120 --total-s 700 \\
        build/test-run/parallel.xml build/test-run/alone.xml
"""

from __future__ import annotations

import argparse
import os
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from python_backends.engine.ipc_dir import SUFFIX as IPC_SUFFIX
from python_backends.engine.orphan_guard import start_time
from tests.support.shared_memory import PREFIXES, SHM, command_line, held_by

# What the tests start (servers, stubs, vLLM's processes, the gateway, load generators)
STARTED_BY_TESTS = ("tritonserver", "triton_python_backend_stub", "VLLM::", "uvicorn", "gateway", "locust",
                    "perf_analyzer", "orphan_guard")


def counts(junit: Path) -> str:
    if not junit.exists():
        return "no report"
    suites = ElementTree.parse(junit).getroot()
    total = {key: 0 for key in ("tests", "failures", "errors", "skipped")}
    for suite in suites.iter("testsuite"):
        for key in total:
            total[key] += int(suite.get(key, 0))
    passed = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    return f"{passed} passed, {total['failures']} failed, {total['errors']} errors, {total['skipped']} skipped"


def leftover_processes(since: int) -> list[str]:
    """Processes of the kinds the tests start that began after `since` (clock ticks after boot) and still run."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        started, command = start_time(int(entry.name)), command_line(int(entry.name))
        if started is not None and started >= since and any(kind in command for kind in STARTED_BY_TESTS):
            found.append(f"pid {entry.name}: {command[:160]}")
    return found


def leftover_files() -> list[str]:
    holders: dict[str, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            for name in held_by(int(entry.name)):
                holders.setdefault(name, []).append(f"pid {entry.name} ({command_line(int(entry.name))[:80]})")
    return [f"{path.name}: held by {', '.join(holders.get(path.name, [])) or 'nobody'}"
            for path in sorted(SHM.iterdir()) if path.name.startswith(PREFIXES)]


def leftover_socket_dirs(since: int) -> list[str]:
    """Directories of vLLM's sockets (python_backends/engine/ipc_dir.py) made after `since` that are still there."""
    stat = Path("/proc/stat").read_text().splitlines()
    boot = next(int(line.split()[1]) for line in stat if line.startswith("btime"))
    run_start = boot + since / os.sysconf("SC_CLK_TCK")
    return [str(path) for path in sorted(Path(tempfile.gettempdir()).glob(f"*{IPC_SUFFIX}*"))
            if path.stat().st_mtime >= run_start]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for phase in ("setup", "parallel", "alone", "total"):
        ap.add_argument(f"--{phase}-s", type=int, required=True)
    ap.add_argument("parallel_xml", type=Path)
    ap.add_argument("alone_xml", type=Path)
    args = ap.parse_args(argv)
    since = start_time(os.getppid()) or 0  # scripts/test.sh, which runs this last
    print(f"test.sh: setup {args.setup_s} s, parallel pass {args.parallel_s} s, alone pass {args.alone_s} s, "
          f"total {args.total_s // 60} min {args.total_s % 60} s")
    print(f"test.sh: parallel pass: {counts(args.parallel_xml)}; alone pass: {counts(args.alone_xml)}")
    for kind, entries in (("processes", leftover_processes(since)), ("/dev/shm files", leftover_files()),
                          ("vLLM socket directories", leftover_socket_dirs(since))):
        print(f"test.sh: left behind, {kind}: {len(entries)}")
        for entry in entries:
            print(f"  {entry}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
