#!/usr/bin/env python3
"""A dead engine on a GPU host: how fast the chart's readiness probe sees it, how long an in-place reload takes,
how the server stops afterwards. Run by hand on a GPU host after the benchmark's build step (random-weight Qwen3
checkpoint in an HF cache), never in CI (pytest does not collect this file).

1. starts ``tools/offline_gpu/start_triton_gpu.sh model_repository --model-config-name=gpu`` with explicit model
   control (what ``scripts/recover_engine.py`` needs) and waits for it;
2. under a closed loop of CONCURRENCY reference requests (64 documents), runs the chart's readiness command
   (``probes.readiness.command`` of deploy/helm/reranker/values.yaml) PROBES times: its wall time and CPU time;
3. SIGKILLs the ``rerank_engine`` stub, then runs the readiness command back to back: seconds until it first fails
   (and what Triton's ready endpoints say meanwhile);
4. ``scripts/recover_engine.py``: seconds until the reload is done and the readiness command passes again;
5. SIGTERM to tritonserver: seconds until it exits, and its exit status.

The random-weight model ranks the health check's two documents at random, so a "wrong ranking" answer counts as the
pipeline answering here (the check's ranking part needs real weights). Writes a JSON report.

    python3 tests/gpu/engine_fault.py --hf-home /tmp/bench/0.26.0/qwen3/hf --out /tmp/engine_fault.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import hf_cache  # noqa: E402
from tools.local_server import free_port, http_ok  # noqa: E402

VALUES = ROOT / "deploy" / "helm" / "reranker" / "values.yaml"


def readiness_command(grpc_port: int) -> list[str]:
    command = yaml.safe_load(VALUES.read_text())["probes"]["readiness"]["command"]
    command = [c.replace("localhost:8001", f"localhost:{grpc_port}") for c in command]
    return [sys.executable if c == "python3" else c for c in command]


def probe(command: list[str]) -> dict:
    """One run of the readiness command: answered (exit 0, or the random model's wrong ranking), wall and CPU s."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    answered = done.returncode == 0 or "wrong ranking" in done.stderr
    return {"answered": answered, "exit": done.returncode, "wall_s": round(time.monotonic() - t0, 3),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
            "said": (done.stdout + done.stderr).strip()[-300:]}


def load(grpc_url: str, concurrency: int, stop: threading.Event, outcomes: list) -> list[threading.Thread]:
    from pydoc_data.topics import topics

    from reranker_client import RerankClient

    text = " ".join(topics.values()).split()
    documents = [" ".join(text[i * 500:(i + 1) * 500]) for i in range(64)]

    def worker(k: int) -> None:
        client = RerankClient(grpc_url, max_retries=0, timeout_s=60)
        while not stop.is_set():
            try:
                client.rerank(f"question {k}", documents)
                outcomes.append("ok")
            except Exception as exc:  # noqa: BLE001 - counted by kind
                outcomes.append(type(exc).__name__)
        client.close()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(concurrency)]
    for t in threads:
        t.start()
    return threads


def stub_pid(model: str) -> int:
    out = subprocess.run(["pgrep", "-f", f"triton_python_backend_stub.*{model}"], capture_output=True, text=True)
    found = {int(p) for p in out.stdout.split()}
    # vLLM forks its engine-core process from the stub: same command line; the stub is the one whose parent is not
    pids = [p for p in found if int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) not in found]
    if len(pids) != 1:
        raise RuntimeError(f"expected one {model} stub, found {pids}")
    return pids[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hf-home", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("/tmp/engine_fault.json"))
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--probes", type=int, default=5)
    args = ap.parse_args()
    ports = {"HTTP_PORT": free_port(), "GRPC_PORT": free_port(), "METRICS_PORT": free_port()}
    env = dict(os.environ, **hf_cache.offline_env(args.hf_home), **{k: str(v) for k, v in ports.items()},
               TRITON_ADMIN_KEY="unused")
    http, grpc = f"127.0.0.1:{ports['HTTP_PORT']}", f"127.0.0.1:{ports['GRPC_PORT']}"
    report: dict = {"readiness_command": readiness_command(8001)}
    log = (args.out.parent / "engine_fault_server.log").open("w")
    start = ["bash", str(ROOT / "tools/offline_gpu/start_triton_gpu.sh"), str(ROOT / "model_repository")]
    server = subprocess.Popen(start + ["--model-config-name=gpu", "--model-control-mode=explicit", "--load-model=*",
                               "--exit-timeout-secs=30"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    t0 = time.monotonic()
    while not http_ok(f"http://{http}/v2/health/ready"):
        if server.poll() is not None or time.monotonic() - t0 > 400:
            raise SystemExit(f"server not ready (exit {server.poll()})")
        time.sleep(0.5)
    report["startup_s"] = round(time.monotonic() - t0, 1)
    command = readiness_command(ports["GRPC_PORT"])
    report["probe_idle"] = probe(command)

    stop, outcomes = threading.Event(), []
    threads = load(grpc, args.concurrency, stop, outcomes)
    time.sleep(5)
    report["probe_under_load"] = [probe(command) for _ in range(args.probes)]
    report["load_concurrency"] = args.concurrency

    pid = stub_pid("rerank_engine")
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    ready_urls = {m: f"http://{http}/v2/models/{m}/ready" for m in ("rerank_engine", "reranker")}
    while True:
        p = probe(command)
        if not p["answered"]:
            break
        if time.monotonic() - killed > 60:
            p = None
            break
    report["unready_after_kill_s"] = round(time.monotonic() - killed, 2) if p else None
    report["failed_probe"] = p
    report["ready_endpoints_after_kill"] = {m: http_ok(u) for m, u in ready_urls.items()}
    stop.set()
    for t in threads:
        t.join(timeout=70)
    report["load_outcomes"] = {k: outcomes.count(k) for k in set(outcomes)}

    t1 = time.monotonic()
    rec = subprocess.run([sys.executable, str(ROOT / "scripts/recover_engine.py"), "--url", http],
                         capture_output=True, text=True, env=env, timeout=400)
    report["recover"] = {"exit": rec.returncode, "s": round(time.monotonic() - t1, 1),
                         "said": (rec.stdout + rec.stderr).strip()[-300:]}
    report["probe_after_recover"] = probe(command)
    report["ready_from_kill_s"] = round(time.monotonic() - killed, 1)

    t2 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        report["exit_status"] = server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.kill()
        report["exit_status"] = "killed after 120 s"
    report["stop_s"] = round(time.monotonic() - t2, 1)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
