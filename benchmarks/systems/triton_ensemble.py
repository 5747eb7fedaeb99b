"""This repository's `reranker` ensemble through Triton gRPC, on the COMMITTED GPU configuration, unchanged:
``tritonserver --model-config-name=<variant>`` on ``model_repository/``, the model id resolved from the HF cache the
build step filled (HF_HOME, HF_HUB_OFFLINE=1 in the server's environment). Only a sweep point (one override) or a
CPU run gets a copy of the repository with a variant written by protobuf (python_backends/model_repository.py).

The probe requests go over gRPC and over HTTP (KServe v2 JSON): both raw scores are kept, for the cross-check
against the direct AsyncLLM. Per level, Triton's statistics give each step's share of the request time; at the end
perf_analyzer runs against the same server (benchmarks/systems/perf_analyzer.py) when asked for."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import time
from pathlib import Path

from benchmarks import engine_config, hf_cache
from benchmarks.procs import ROOT, ServerProcess, http_json, log
from benchmarks.settings import Settings
from benchmarks.systems import invariance, overload, perf_analyzer, triton_stats
from benchmarks.systems.common import drive
from benchmarks.workload import Workload
from loadtest import payload
from python_backends.model_repository import ENGINE, config_path, copy_with_variant
from tools.local_server import free_port, http_ok

BENCH_CONFIG = "bench"
# What Triton logs when a model cannot load (then it exits, or serves without that model): stop waiting at once.
LOAD_FAILURE = re.compile(r"^E\d{4} .*(failed to load|Python model file not found|Stub process .* is not healthy).*$"
                          r"|^error: creating server.*$", re.MULTILINE)


def repository(s: Settings) -> tuple[Path, str]:
    """(model repository, config name): the committed one as is, or a protobuf-written variant of it."""
    if s.device == "cuda" and not s.override:
        return ROOT / "model_repository", s.variant
    engine, steps = engine_config.split_override(s.override)
    override = {**(engine_config.CPU_ENGINE if s.device == "cpu" else {}), **engine}
    kind = "KIND_CPU" if s.device == "cpu" else None
    repo = copy_with_variant(s.work / f"repo-{s.point}", BENCH_CONFIG, base=s.variant, parameters=steps,
                             engine_override=override, engine_kind=kind)
    return repo, BENCH_CONFIG


def start(s: Settings, result: dict, pgid_file: Path, deadline: float) -> tuple[ServerProcess, dict]:
    repo, config = repository(s)
    ports = {"HTTP_PORT": free_port(), "GRPC_PORT": free_port(), "METRICS_PORT": free_port()}
    env = dict(os.environ, MODEL_REPOSITORY=str(repo), **hf_cache.offline_env(s.hf_home),
               **{k: str(v) for k, v in ports.items()})
    argv = [a.replace("{repo}", str(repo)).replace("{config}", config) for a in shlex.split(s.triton_start)]
    argv.append("--exit-timeout-secs=10")
    engine_cfg = config_path(repo, ENGINE, config)
    shutil.copy(engine_cfg, s.logs / f"triton_rerank_engine.{config}.pbtxt")
    server = ServerProcess(argv, s.logs / "triton_server.log", env, pgid_file)
    urls = {"http": f"127.0.0.1:{ports['HTTP_PORT']}", "grpc": f"127.0.0.1:{ports['GRPC_PORT']}",
            "metrics": f"127.0.0.1:{ports['METRICS_PORT']}"}
    try:
        startup = server.wait_ready(lambda: http_ok(f"http://{urls['http']}/v2/health/ready"),
                                    deadline - time.monotonic() - 30, "tritonserver", LOAD_FAILURE)
    except BaseException:  # includes the parent's SIGTERM at the time budget: never leave the server running
        server.stop()
        raise
    result.update(command=shlex.join(argv), repository=str(repo), config_name=config, startup_s=round(startup, 1),
                  engine_args=engine_config.engine_args(config, repository=repo))
    log(f"  tritonserver ({config}) ready in {result['startup_s']} s")
    return server, urls


def http_raw_scores(url: str, request) -> list[float]:
    body = http_json(f"http://{url}/v2/models/{payload.MODEL_NAME}/infer", payload.kserve_json(request), timeout=120)
    return [float(x) for x in payload.kserve_outputs(body)["RAW_SCORES"]]


async def measure(s: Settings, work: Workload, urls: dict, result: dict, deadline: float) -> None:
    import numpy as np
    import tritonclient.grpc as grpcmod
    import tritonclient.grpc.aio as grpcaio

    prepared = {k: payload.grpc_inputs(r, grpcmod) for k, r in enumerate(work.requests)}  # before the clock
    client = grpcaio.InferenceServerClient(url=urls["grpc"])

    async def infer(k: int, prepared=prepared, requests=work.requests):
        inputs, outputs = prepared[k]
        res = await client.infer(payload.MODEL_NAME, inputs, outputs=outputs)
        n, top_n = len(requests[k].documents), requests[k].top_n
        payload.check_result(n, top_n, res.as_numpy("SCORES").ravel(), res.as_numpy("RANKING").ravel())
        if int(res.as_numpy("TRUNCATED").ravel()[0]) != 0:
            raise RuntimeError("pairs truncated")
        return res

    def raw(res) -> list[float]:
        return [float(x) for x in np.asarray(res.as_numpy("RAW_SCORES")).ravel()]

    async def probe(k: int):
        return raw(await infer(k))

    async def raw_scores(request):  # any request, for the invariance check's other load
        inputs, outputs = payload.grpc_inputs(request, grpcmod)
        return raw(await client.infer(payload.MODEL_NAME, inputs, outputs=outputs))

    def between(when, before=None, level=None):
        time.sleep(0.5)  # let the last batch's statistics land
        now = triton_stats.snapshot(urls["http"], urls["metrics"])
        return now if when == "before" else triton_stats.delta(before, now, level)

    try:
        await drive(s, work, infer, probe, result, deadline, between)
        result["probe_http"] = [{"request": p["request"], "raw": http_raw_scores(urls["http"], work.requests[p["request"]])}
                                for p in result["probe"]]
        result["http_vs_grpc_max_abs_diff"] = max(
            (float(np.max(np.abs(np.asarray(a["raw"]) - np.asarray(b["raw"]))))
             for a, b in zip(result["probe"], result["probe_http"])), default=None)
        if s.invariance_levels:
            result["invariance"] = await invariance.measure(raw_scores, work.requests, s.invariance_levels, deadline)
        if s.point == "base":  # a sweep point measures the engine change only
            await server_checks(s, work, urls, infer, probe, result, deadline)
    finally:
        await client.close()


async def server_checks(s: Settings, work: Workload, urls: dict, infer, probe, result: dict, deadline: float) -> None:
    """perf_analyzer beside the load generator, then the overload, on the server the levels ran against."""
    if s.perf_levels:
        reqs = work.requests[: s.perf_requests]
        result["perf_analyzer"] = await perf_analyzer.compare(infer, reqs, urls["grpc"], s.perf_levels,
                                                              s.logs / "perf_analyzer", deadline)
    if s.overload_factor and result["levels"] and time.monotonic() < deadline - 3 * s.overload_s:
        result["overload"] = await overload.run(
            infer, probe, result["probe"][0]["raw"], len(work.requests), result["levels"][-1]["requests_per_s"],
            s.overload_factor, s.overload_s)


def run(s: Settings, result: dict, pgid_file: Path) -> None:
    work = Workload(s)
    t_start = time.monotonic()
    deadline = t_start + s.budgets["triton"] - 20
    server, urls = start(s, result, pgid_file, deadline)
    try:
        asyncio.run(measure(s, work, urls, result, deadline))
        result["workload"] = work.describe()
    finally:
        server.stop()
        result["total_s"] = round(time.monotonic() - t_start, 1)
        tail = server.tail(4000)
        if "error" in tail.lower():
            result["server_log_tail"] = tail[-2000:]
