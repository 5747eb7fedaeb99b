"""Processes and GPU memory for the benchmark: servers in their own process group, stopped whole; nvidia-smi polls."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def http_json(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


class ServerProcess:
    """A server started in its own session; stopped with SIGTERM then SIGKILL of the whole process group."""

    def __init__(self, argv: list[str], log_path: Path, env: dict, pgid_file: Path):
        self.log_path = log_path
        self.log = log_path.open("w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     cwd=str(ROOT))
        with pgid_file.open("a") as f:
            f.write(f"{self.proc.pid}\n")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def key_lines(self, n: int = 12) -> str:
        """The log's error lines (Triton's model table and vLLM's INFO lines hide them in a plain tail)."""
        lines = self.tail(200_000).splitlines()
        hits = [ln[:400] for ln in lines if re.search(r"^E\d{4}|error|Error|Traceback|failed|Failed", ln)]
        return "\n".join(hits[-n:]) or self.tail(1500)

    def failure(self, fatal: re.Pattern | None) -> str | None:
        """The first log line matching `fatal` (a load failure the server states before it exits, or instead)."""
        if fatal is None:
            return None
        match = fatal.search(self.tail(1_000_000))
        return match.group(0)[:600] if match else None

    def wait_ready(self, check, timeout_s: float, what: str, fatal: re.Pattern | None = None) -> float:
        """Seconds until `check()` is true; raises at once, with the server's own words, when the process exits or
        its log states a failure matching `fatal`, instead of waiting out `timeout_s`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if not self.alive():
                raise RuntimeError(f"{what} exited with {self.proc.returncode}: {self.key_lines()}")
            if line := self.failure(fatal):
                raise RuntimeError(f"{what} failed to load after {time.monotonic() - t0:.0f} s: {line}")
            if check():
                return time.monotonic() - t0
            time.sleep(0.5)
        raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s: {self.key_lines()}")

    def stop(self, timeout_s: float = 30) -> None:
        kill_group(self.proc.pid, timeout_s, self.proc)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        self.log.close()


def status_mb(pid: int, *fields: str) -> dict[str, float]:
    """Memory fields of /proc/<pid>/status (VmRSS, VmHWM, RssAnon, RssShmem, ...) in MB."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {field: int(status[field].split()[0]) / 1024 for field in fields}


def kill_group(pgid: int, timeout_s: float = 30, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the group, wait until it is gone (reaping our own child, which would stay a zombie), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if proc is not None:
                proc.poll()
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.3)
        os.killpg(pgid, signal.SIGKILL)


def gpu_memory_used_mib() -> list[int] | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return [int(x) for x in out.split()]
    except Exception:  # noqa: BLE001
        return None


class MemoryPoller:
    """Peak of nvidia-smi's memory.used (GPU 0) while a system runs."""

    def __init__(self, period_s: float = 0.5):
        self.period_s = period_s
        self.baseline = (gpu_memory_used_mib() or [None])[0]
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.period_s):
            used = gpu_memory_used_mib()
            if used:
                self.peak = max(self.peak or 0, used[0])

    def __enter__(self):
        if self.baseline is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=15)

    def report(self) -> dict:
        return {"baseline_mib": self.baseline, "peak_mib": self.peak,
                "peak_over_baseline_mib": None if self.peak is None else self.peak - (self.baseline or 0)}


def wait_gpu_free(baseline: int | None, timeout_s: float = 60) -> None:
    if baseline is None:
        return
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        used = gpu_memory_used_mib()
        if not used or used[0] <= baseline + 1024:
            return
        time.sleep(1)
    log(f"GPU memory still {gpu_memory_used_mib()} MiB after {timeout_s} s (baseline {baseline})")
