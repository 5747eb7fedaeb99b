"""The gateway against slow and large request heads: connections whose request line and headers trickle in a byte at
a time, and heads of 10 MB.

Starts `python -m gateway` (default settings; no Triton is needed, no call reaches it), opens `--slow` connections
that each send a request line and then one header byte every 0.5 s, and records when each is closed and what it was
answered (for at most `--wait` seconds), with the process's RSS; then sends `--large` heads of 10 MB, one at a time,
and records each outcome and the RSS after it. Printed as a table and written as JSON:

    .venv/bin/python -m benchmarks.gateway_heads --out benchmarks/results/cpu-gateway-heads.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from benchmarks.gateway_body_memory import ROOT, peak_rss_mb
from benchmarks.procs import status_mb
from tests.support.gateway import http_status
from tools.local_server import free_port

LINE = b"POST /v2/rerank HTTP/1.1\r\nHost: gateway\r\n"


def rss_mb(pid: int) -> float:
    return status_mb(pid, "VmRSS")["VmRSS"]


def answered(conn: socket.socket, deadline: float) -> str | None:
    """The status the gateway answered before closing ("closed": nothing, "reset"), None while still open."""
    conn.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        data = conn.recv(64)
    except TimeoutError:
        return None
    except ConnectionError:
        return "reset"
    return data.split(b" ")[1].decode() if data else "closed"


def slow_heads(port: int, pid: int, count: int, wait_s: float) -> dict:
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    started = time.monotonic()
    for conn in conns:
        conn.sendall(LINE)
    ended: dict[int, float] = {}

    def trickle() -> None:
        while len(ended) < count and time.monotonic() - started < wait_s:
            for i, conn in enumerate(conns):
                try:
                    if i not in ended:
                        conn.sendall(b"X")
                except OSError:
                    ended.setdefault(i, time.monotonic() - started)
            time.sleep(0.5)

    writer = threading.Thread(target=trickle)
    writer.start()
    time.sleep(3)
    held_rss = rss_mb(pid)
    outcomes = []
    for i, conn in enumerate(conns):
        outcome = answered(conn, started + wait_s)
        outcomes.append(outcome or "open")
        if outcome is not None:
            ended.setdefault(i, time.monotonic() - started)
    writer.join()
    for conn in conns:
        conn.close()
    times = sorted(ended.values())
    return {"connections": count, "rss_mb_while_held": round(held_rss, 1), "outcomes": dict(Counter(outcomes)),
            "closed_after_s": [round(times[0], 1), round(times[-1], 1)] if times else None, "watched_s": wait_s}


def large_head(port: int, pid: int, size: int) -> dict:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        try:
            conn.sendall(b"GET /health/live HTTP/1.1\r\nHost: gateway\r\nX-Pad: " + b"p" * size + b"\r\n\r\n")
            outcome = answered(conn, time.monotonic() + 30) or "open"
        except ConnectionError:
            outcome = "reset"
    time.sleep(0.3)
    return {"head_bytes": size, "outcome": outcome, "rss_mb_after": round(rss_mb(pid), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=500)
    parser.add_argument("--wait", type=float, default=20.0, help="seconds the slow connections are watched")
    parser.add_argument("--large", type=int, default=3)
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose gateway runs (default: this)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    port = free_port()
    env = dict(os.environ, TRITON_GRPC_URL="127.0.0.1:1", GATEWAY_PORT=str(port), GATEWAY_LOG_LEVEL="warning",
               PYTHONPATH=str(args.source))
    gateway = subprocess.Popen([sys.executable, "-m", "gateway"], env=env, cwd=args.source,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while http_status(f"http://127.0.0.1:{port}/health/live") != 200:
            time.sleep(0.2)
        idle = rss_mb(gateway.pid)
        slow = slow_heads(port, gateway.pid, args.slow, args.wait)
        large = [large_head(port, gateway.pid, 10_000_000) for _ in range(args.large)]
        peak = peak_rss_mb(gateway.pid)
    finally:
        gateway.terminate()
        gateway.wait(30)
    print(f"gateway of {args.source}: idle RSS {idle:.1f} MB, peak {peak:.1f} MB")
    print(f"{args.slow} slow heads: {slow['outcomes']} within {args.wait:g} s, closed after {slow['closed_after_s']} s, "
          f"RSS {slow['rss_mb_while_held']} MB while held")
    print(f"{'10 MB head':>12} {'outcome':>8} {'RSS after MB':>13}")
    for i, row in enumerate(large, 1):
        print(f"{i:>12} {row['outcome']:>8} {row['rss_mb_after']:>13}")
    if args.out:
        result = {"idle_rss_mb": round(idle, 1), "peak_rss_mb": round(peak, 1), "slow_heads": slow,
                  "large_heads": large}
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
