#!/usr/bin/env python3
"""Reranker serving benchmark: the Triton ensemble vs `vllm serve` vs a plain transformers loop, same GPU, same run.

Systems (``--systems``, run in this order, each in its own child process with a hard time budget, so one failure
or hang loses only its own numbers; servers are stopped between systems to free the GPU):

- ``build``   random-weight checkpoints (benchmarks/build_models.py), skipped when already built;
- ``matmul``  the GPU's bf16 matrix rate, 8192^3, median of 10 after warm-up: the FLOP ceiling;
- ``hf``      the "legacy" pipeline: one request at a time, its pairs padded into one batch through
              AutoModelForCausalLM (sdpa), score = logit_yes - logit_no at the last position (XLM-R: the logit);
- ``vllm``    ``python3 -m vllm.entrypoints.openai.api_server --runner pooling`` hit on ``POST /rerank``;
- ``triton``  this repository's ``reranker`` ensemble through Triton gRPC, from a model repository generated from
              ``model_repository/`` (benchmarks/gpu_repo.py), with per-model time from ``/v2/models/<m>/stats``.

Load (seed 003): per request one query of ~20 tokens and 64 documents of ~500 tokens (benchmarks/corpus.py),
top_n=10; closed loop at concurrency 1, 8, 32, 64, each level a fixed number of requests (max(2c, 16)) after a
warm-up. Every request of a system is distinct (vLLM's prefix cache is on by default: repeated documents would be
free). Reported per level: pairs/s, tokens/s, share of the FLOP ceiling (benchmarks/flops.py over the matmul rate),
P50/P95/P99 latency, peak GPU memory (nvidia-smi, polled; torch's peak for hf); for Triton the share of request
time spent in preprocess + calibrate vs the engine. Scores of the first requests are compared across systems.

Output (``--out``): benchmark.json, benchmark.png, logs/; a compact table is printed last. Results of earlier
invocations with the same ``--work`` folder are merged (so two device calls can each run some systems).

    python3 benchmarks/run_gpu_benchmark.py --out $OUT --work /tmp/bench                 # GPU, everything
    python3 benchmarks/run_gpu_benchmark.py --out /tmp/o --work /tmp/bt --tiny            # CPU check, tiny shapes
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("PYTHONUNBUFFERED", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

from benchmarks import corpus as bcorpus  # noqa: E402
from benchmarks.build_models import QWEN3_NAME, XLMR_NAME  # noqa: E402
from benchmarks.flops import FlopModel  # noqa: E402

ALL_SYSTEMS = ("build", "matmul", "triton", "vllm", "hf")
LOAD_SYSTEMS = ("triton", "vllm", "hf")
LABELS = {"triton": "Triton ensemble (gRPC)", "vllm": "vllm serve /rerank", "hf": "transformers loop"}
QWEN3_OVERRIDES = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}
CPU_VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
NOMINAL_BF16_FLOPS = 790e12  # BRIEF.md's H200 figure, used only when no matmul was measured


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def http_json(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------------------
# Configuration shared by parent and children


@dataclass
class Settings:
    out: Path
    work: Path
    tiny: bool
    model: str  # "qwen3" or "xlmr"
    device: str  # "cuda" or "cpu"
    concurrency: list[int]
    min_requests: int
    warmup: int
    probe: int
    max_model_len: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    dtype: str
    request_timeout_s: float
    budgets: dict[str, float]
    triton_start: str
    vllm_python: str
    engine_set: dict[str, str] = field(default_factory=dict)
    triton_fallback: bool = True
    triton_start_timeout: float = 240
    preprocess_instances: int = 0  # 0: as model_repository/ has it
    vllm_args: list[str] = field(default_factory=list)

    @property
    def logs(self) -> Path:
        return self.work / ("logs-tiny" if self.tiny else "logs")

    @property
    def models_dir(self) -> Path:
        return self.work / ("models-tiny" if self.tiny else "models")

    @property
    def model_dir(self) -> Path:
        return self.models_dir / (QWEN3_NAME if self.model == "qwen3" else XLMR_NAME)

    full_load: bool = False  # --tiny models with the real load shape (64 docs x ~500 tokens)

    @property
    def shape(self) -> bcorpus.Shape:
        return bcorpus.TINY_SHAPE if self.tiny and not self.full_load else bcorpus.Shape()

    def plan(self) -> list[tuple[int, int]]:
        return [(c, max(2 * c, self.min_requests)) for c in self.concurrency]

    def total_requests(self) -> int:
        return self.probe + self.warmup + sum(n for _, n in self.plan())

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["out"], d["work"] = str(self.out), str(self.work)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Settings":
        d = dict(d)
        d["out"], d["work"] = Path(d["out"]), Path(d["work"])
        return cls(**d)


# ---------------------------------------------------------------------------------------------------------------
# Workload: the same distinct requests for every system


class Workload:
    """Requests 0..N-1 (seeds), their exact token sequences (the preprocess step's own encoder) and FLOPs."""

    def __init__(self, s: Settings):
        from python_backends.model_family import ModelFamily, detect_model
        from python_backends.prompts import qwen3_reranker_prompt
        from python_backends.tokenization import make_encoder

        import pickle

        t0 = time.perf_counter()
        self.model_dir = str(s.model_dir)
        self.info = detect_model(self.model_dir)
        self.yes_no = self.info.family is ModelFamily.YES_NO_RERANKER
        self.encoder = make_encoder(self.info.family, self.model_dir, s.max_model_len)
        self.flop_model = FlopModel.from_config(self.model_dir)
        # built once per settings (by the build step), then loaded: tokenizing ~15k documents takes seconds
        key = json.dumps([self.model_dir, s.total_requests(), s.max_model_len, s.shape.__dict__], sort_keys=True)
        cache = s.work / f"workload-{s.model}{'-tiny' if s.tiny else ''}.pkl"
        cached = pickle.loads(cache.read_bytes()) if cache.is_file() else {}
        if cached.get("key") == key and (s.model_dir / "model.safetensors").stat().st_mtime < cache.stat().st_mtime:
            self.requests, self.lengths, self.flops = cached["requests"], cached["lengths"], cached["flops"]
        else:
            self.requests = bcorpus.make_requests(self.model_dir, s.total_requests(), 0, s.shape)
            self.lengths, self.flops = [], []
            truncated = 0
            for r in self.requests:
                enc = self.encoder.encode(r.query, list(r.documents), None)
                truncated += enc.truncated
                self.lengths.append(enc.lengths)
                self.flops.append(self.flop_model.request(enc.lengths))
            if truncated:
                raise ValueError(f"{truncated} pairs exceed max_model_len={s.max_model_len}: raise it")
            cache.write_bytes(pickle.dumps({"key": key, "requests": self.requests, "lengths": self.lengths,
                                            "flops": self.flops}))
        self.tokens = [sum(x) for x in self.lengths]
        self._prompt = qwen3_reranker_prompt
        self.seconds = round(time.perf_counter() - t0, 2)

    def describe(self) -> dict:
        all_lengths = [n for ls in self.lengths for n in ls]
        return {
            "model_dir": self.model_dir,
            "family": self.info.family.value,
            "requests": len(self.requests),
            "docs_per_request": len(self.requests[0].documents),
            "top_n": self.requests[0].top_n,
            "query_words": len(self.requests[0].query.split()),
            "doc_words_mean": round(statistics.mean(len(d.split()) for d in self.requests[0].documents), 1),
            "tokens_per_pair_mean": round(statistics.mean(all_lengths), 1),
            "tokens_per_pair_min": min(all_lengths),
            "tokens_per_pair_max": max(all_lengths),
            "tokens_per_request_mean": round(statistics.mean(self.tokens), 1),
            "flop_per_token": round(sum(self.flops) / sum(self.tokens)),
            "non_embedding_linear_params": self.flop_model.linear_params,
            "prepare_s": self.seconds,
        }

    def vllm_body(self, k: int, top_n: int | None = None) -> dict:
        r = self.requests[k]
        if self.yes_no:  # the exact Qwen3-Reranker prompt: vLLM concatenates query + document for an LLM reranker
            p = self._prompt(r.query)
            query, docs = p.head, [d + p.suffix for d in r.documents]
        else:
            query, docs = r.query, list(r.documents)
        return {"model": "bench", "query": query, "documents": docs, "top_n": top_n or r.top_n}


# ---------------------------------------------------------------------------------------------------------------
# Closed-loop load


async def run_level(send, first: int, n_requests: int, concurrency: int, work: Workload, deadline: float,
                    timeout_s: float) -> dict:
    """`concurrency` workers each send the next request index, wait for its answer, and go on."""
    counter = itertools.count()
    latencies, done, errors = [], [], []

    async def worker():
        while True:
            k = next(counter)
            if k >= n_requests or time.monotonic() > deadline:
                return
            idx = first + k
            t0 = time.perf_counter()
            try:
                await asyncio.wait_for(send(idx), timeout_s)
            except Exception as exc:  # noqa: BLE001 - counted, reported
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            latencies.append(time.perf_counter() - t0)
            done.append(idx)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    pairs = sum(len(work.requests[i].documents) for i in done)
    tokens = sum(work.tokens[i] for i in done)
    flops = sum(work.flops[i] for i in done)
    lat_ms = [x * 1000 for x in latencies]
    return {
        "concurrency": concurrency,
        "requests": len(done),
        "planned": n_requests,
        "errors": len(errors),
        "error_examples": errors[:3],
        "complete": len(done) == n_requests,
        "wall_s": round(wall, 4),
        "requests_per_s": round(len(done) / wall, 3) if wall else 0.0,
        "pairs_per_s": round(pairs / wall, 1) if wall else 0.0,
        "tokens_per_s": round(tokens / wall) if wall else 0,
        "useful_flops_per_s": flops / wall if wall else 0.0,
        "latency_ms": {k: (round(v, 2) if v is not None else None) for k, v in (
            ("p50", percentile(lat_ms, 50)), ("p95", percentile(lat_ms, 95)), ("p99", percentile(lat_ms, 99)),
            ("mean", statistics.mean(lat_ms) if lat_ms else None), ("min", min(lat_ms) if lat_ms else None),
            ("max", max(lat_ms) if lat_ms else None))},
    }


async def drive(s: Settings, work: Workload, send, probe, result: dict, deadline: float, between=None) -> None:
    """Probe (scores kept for the cross-check), warm-up, then the levels; `between(level)` runs after each."""
    k = 0
    result["probe"] = []
    for _ in range(s.probe):
        result["probe"].append({"request": k, "raw": await asyncio.wait_for(probe(k), s.request_timeout_s)})
        k += 1
    t0 = time.perf_counter()
    warm = await run_level(send, k, s.warmup, min(4, max(1, s.warmup)), work, deadline, s.request_timeout_s)
    result["warmup"] = {"requests": warm["requests"], "errors": warm["errors"], "s": round(time.perf_counter() - t0, 2),
                        "error_examples": warm["error_examples"]}
    if warm["errors"] and not warm["requests"]:
        raise RuntimeError(f"every warm-up request failed: {warm['error_examples']}")
    k += s.warmup
    result["levels"] = []
    for conc, n in s.plan():
        if time.monotonic() > deadline:
            result.setdefault("skipped_levels", []).append(conc)
            continue
        before = between("before") if between else None
        level = await run_level(send, k, n, conc, work, deadline, s.request_timeout_s)
        if between:
            level.update(between("after", before, level))
        k += n
        result["levels"].append(level)
        lat = level["latency_ms"]
        log(f"  c={conc:<3} {level['requests']}/{n} ok  {level['pairs_per_s']:>8} pairs/s  "
            f"{level['tokens_per_s']:>8} tok/s  p50 {lat['p50']} ms  p99 {lat['p99']} ms  errors {level['errors']}")


# ---------------------------------------------------------------------------------------------------------------
# Process management


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

    def wait_ready(self, check, timeout_s: float, what: str) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if not self.alive():
                raise RuntimeError(f"{what} exited with {self.proc.returncode}: {self.key_lines()}")
            if check():
                return time.monotonic() - t0
            time.sleep(0.5)
        raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s: {self.key_lines()}")

    def stop(self, timeout_s: float = 30) -> None:
        kill_group(self.proc.pid, timeout_s, self.proc)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        self.log.close()


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


# ---------------------------------------------------------------------------------------------------------------
# GPU memory


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


# ---------------------------------------------------------------------------------------------------------------
# Children: one system each


def child_build(s: Settings, result: dict) -> None:
    from benchmarks.build_models import build

    stamp = s.models_dir / "BUILD.json"
    t0 = time.perf_counter()
    if stamp.is_file() and (s.model_dir / "model.safetensors").is_file():
        result["skipped"] = "already built"
        result["build"] = json.loads(stamp.read_text())
    else:
        result["build"] = build(s.models_dir, ["qwen3", "xlmr"], s.tiny, s.device, None, 0)
    result["build_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    result["workload"] = Workload(s).describe()  # generated and tokenized once, here, for every system
    result["workload_s"] = round(time.perf_counter() - t0, 2)
    log(f"  models {result['build_s']} s, workload {result['workload_s']} s: {result['workload']}")


def child_matmul(s: Settings, result: dict) -> None:
    import torch

    n = 1024 if s.tiny else 8192
    dtype = torch.bfloat16 if s.device == "cuda" else torch.float32
    gen = torch.Generator(device=s.device).manual_seed(0)
    pairs = [(torch.randn(n, n, device=s.device, dtype=dtype, generator=gen),
              torch.randn(n, n, device=s.device, dtype=dtype, generator=gen)) for _ in range(3)]
    times = []
    for i in range(13):  # 3 warm-up, 10 timed; inputs rotate among three pairs
        a, b = pairs[i % 3]
        if s.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            c = a @ b
            end.record()
            torch.cuda.synchronize()
            dt = start.elapsed_time(end) / 1000
        else:
            t0 = time.perf_counter()
            c = a @ b
            dt = time.perf_counter() - t0
        if i >= 3:
            times.append(dt)
    if not torch.isfinite(c.float()).all():
        raise RuntimeError("non-finite matmul output")
    med = statistics.median(times)
    result.update({
        "n": n, "dtype": str(dtype), "device": torch.cuda.get_device_name(0) if s.device == "cuda" else "cpu",
        "median_s": med, "times_s": times, "flops_per_s": 2 * n**3 / med,
        "tflops": round(2 * n**3 / med / 1e12, 1),
    })
    log(f"  matmul {n}^3 {dtype}: {result['tflops']} TFLOP/s (median of 10)")


def child_hf(s: Settings, result: dict) -> None:
    import concurrent.futures

    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    work = Workload(s)
    deadline = time.monotonic() + s.budgets["hf"] - 10
    dtype = torch.bfloat16 if s.device == "cuda" else torch.float32
    t0 = time.perf_counter()
    cls = AutoModelForCausalLM if work.yes_no else AutoModelForSequenceClassification
    model = cls.from_pretrained(work.model_dir, dtype=dtype, attn_implementation="sdpa").to(s.device).eval()
    tok = work.encoder
    yes_id = no_id = pad_id = None
    if work.yes_no:
        from transformers import AutoTokenizer

        hf_tok = AutoTokenizer.from_pretrained(work.model_dir)
        yes_id, no_id = hf_tok.convert_tokens_to_ids("yes"), hf_tok.convert_tokens_to_ids("no")
        pad_id = hf_tok.pad_token_id
    else:
        pad_id = model.config.pad_token_id
    result["load_s"] = round(time.perf_counter() - t0, 2)
    if s.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    padded_tokens = []

    @torch.inference_mode()
    def score(k: int) -> list[float]:
        r = work.requests[k]
        ids = tok.encode(r.query, list(r.documents), None).token_ids  # tokenization is part of the legacy request
        longest = max(len(x) for x in ids)
        batch = torch.full((len(ids), longest), pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), longest), dtype=torch.long)
        for i, x in enumerate(ids):
            if work.yes_no:  # left padding: the answer position is the last one for every row
                batch[i, longest - len(x):] = torch.tensor(x)
                mask[i, longest - len(x):] = 1
            else:
                batch[i, :len(x)] = torch.tensor(x)
                mask[i, :len(x)] = 1
        batch, mask = batch.to(s.device), mask.to(s.device)
        padded_tokens.append(batch.numel())
        if work.yes_no:
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=batch, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits[:, -1, :]
            raw = (logits[:, yes_id] - logits[:, no_id]).float()
        else:
            raw = model(input_ids=batch, attention_mask=mask).logits[:, 0].float()
        return raw.cpu().tolist()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)  # the legacy server: one request at a time

    async def send(k: int):
        return await asyncio.get_running_loop().run_in_executor(pool, score, k)

    async def main():
        await drive(s, work, send, send, result, deadline)

    asyncio.run(main())
    pool.shutdown(wait=True)
    result["workload"] = work.describe()
    result["padded_tokens_per_request_mean"] = round(statistics.mean(padded_tokens))
    result["padding_overhead"] = round(sum(padded_tokens) / sum(work.tokens[: len(padded_tokens)]) - 1, 4)
    if s.device == "cuda":
        result["torch_max_memory_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    result["attn_implementation"] = getattr(model.config, "_attn_implementation", "sdpa")
    result["dtype"] = str(dtype)


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


def child_vllm(s: Settings, result: dict, pgid_file: Path) -> None:
    import aiohttp

    work = Workload(s)
    t_start = time.monotonic()
    deadline = t_start + s.budgets["vllm"] - 15
    port = free_port()
    argv = [s.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", work.model_dir,
            "--served-model-name", "bench", "--runner", "pooling", "--enforce-eager",
            "--max-model-len", str(s.max_model_len), "--max-num-batched-tokens", str(s.max_num_batched_tokens),
            "--dtype", s.dtype, "--host", "127.0.0.1", "--port", str(port), "--uvicorn-log-level", "warning"]
    if s.device == "cuda":
        argv += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    if work.yes_no:
        argv += ["--hf-overrides", json.dumps(QWEN3_OVERRIDES)]
    argv += s.vllm_args
    env = dict(os.environ)
    env.update({"VLLM_USE_FLASHINFER_SAMPLER": "0"} if s.device == "cuda" else CPU_VLLM_ENV)
    # the kit's client-only protobuf (site/client_extra) stays off the server's path
    env["PYTHONPATH"] = ":".join(p for p in env.get("PYTHONPATH", "").split(":")
                                 if p and not p.rstrip("/").endswith("client_extra"))
    result["command"] = shlex.join(argv)
    log_path = s.logs / "vllm_serve.log"
    server = ServerProcess(argv, log_path, env, pgid_file)
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


def _logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


TRITON_MODELS = ("reranker", "rerank_preprocess", "rerank_engine", "rerank_calibrate")


def _triton_stats(http: str) -> dict:
    out = {}
    for m in TRITON_MODELS:
        st = http_json(f"http://{http}/v2/models/{m}/stats", timeout=10)["model_stats"][0]
        inf = st["inference_stats"]
        out[m] = {
            "count": int(inf["success"]["count"]),
            "success_ns": int(inf["success"]["ns"]),
            "queue_ns": int(inf["queue"]["ns"]),
            "compute_ns": sum(int(inf[p]["ns"]) for p in ("compute_input", "compute_infer", "compute_output")),
            "compute_infer_ns": int(inf["compute_infer"]["ns"]),
            "executions": int(st.get("execution_count", 0)),
            "batch_busy_ns": sum(int(b["compute_input"]["ns"]) + int(b["compute_infer"]["ns"])
                                 + int(b["compute_output"]["ns"]) for b in st.get("batch_stats", [])),
        }
    return out


def _stats_delta(before: dict, after: dict, level: dict) -> dict:
    """Per request (means, ms) and as shares of the mean end-to-end latency the client saw."""
    d = {m: {k: after[m][k] - before[m][k] for k in after[m]} for m in after}
    e2e_ms = level["latency_ms"]["mean"] or float("nan")
    per = {}
    for m in TRITON_MODELS[1:]:
        n = max(1, d[m]["count"])  # its own requests: stats of the last batch may land after the client's answer
        per[m] = {
            "requests": d[m]["count"],
            "executions": d[m]["executions"],
            "mean_batch": round(d[m]["count"] / d[m]["executions"], 2) if d[m]["executions"] else None,
            "queue_ms": round(d[m]["queue_ns"] / n / 1e6, 3),
            "compute_ms": round(d[m]["compute_ns"] / n / 1e6, 3),
            "busy_s": round(d[m]["batch_busy_ns"] / 1e9, 3),
            "busy_share_of_wall": round(d[m]["batch_busy_ns"] / 1e9 / level["wall_s"], 4) if level["wall_s"] else None,
        }
    pre_cal = per["rerank_preprocess"]["compute_ms"] + per["rerank_calibrate"]["compute_ms"]
    engine = per["rerank_engine"]["compute_ms"]
    queues = sum(per[m]["queue_ms"] for m in per)
    ens_ms = d["reranker"]["success_ns"] / max(1, d["reranker"]["count"]) / 1e6
    return {"triton_stats": {
        "ensemble_requests": d["reranker"]["count"],
        "per_model": per,
        "ensemble_server_ms": round(ens_ms, 3),
        "pre_calibrate_compute_ms": round(pre_cal, 3),
        "engine_compute_ms": round(engine, 3),
        "queue_ms": round(queues, 3),
        "share_pre_calibrate": round(pre_cal / e2e_ms, 4),
        "share_engine": round(engine / e2e_ms, 4),
        "share_queue": round(queues / e2e_ms, 4),
        "share_other": round(1 - (pre_cal + engine + queues) / e2e_ms, 4),  # network, ensemble hops, client
    }}


def child_triton(s: Settings, result: dict, pgid_file: Path) -> None:
    import numpy as np
    import tritonclient.grpc as grpcmod
    import tritonclient.grpc.aio as grpcaio

    from benchmarks.gpu_repo import GPU_ENGINE, bench_profile, make_repository
    from reranker_client import build_inputs

    work = Workload(s)
    baseline = (gpu_memory_used_mib() or [None])[0]
    t_start = time.monotonic()
    deadline = t_start + s.budgets["triton"] - 20
    repo = s.work / ("repo-tiny" if s.tiny else "repo")
    engine = {"max_model_len": str(s.max_model_len), "max_num_batched_tokens": str(s.max_num_batched_tokens),
              "dtype": s.dtype}
    if s.device == "cuda":
        engine = dict(GPU_ENGINE, **engine, gpu_memory_utilization=str(s.gpu_memory_utilization))
    engine.update(s.engine_set)
    profile = bench_profile("sigmoid", work.info.score_type, work.model_dir)
    # Second try, only if the first does not come up: the engine core inside the stub's own process
    # (VLLM_ENABLE_V1_MULTIPROCESSING=0), as benchmarks/gpu/run_probe.sh checked vLLM inside a stub.
    variants = [("as configured", engine)]
    if s.triton_fallback:
        env_inproc = dict(json.loads(engine.get("vllm_env", "{}")), VLLM_ENABLE_V1_MULTIPROCESSING="0")
        if env_inproc != json.loads(engine.get("vllm_env", "{}")):
            variants.append(("engine core in-process", dict(engine, vllm_env=json.dumps(env_inproc))))
    result["attempts"] = []
    server = None
    for attempt, (variant, params) in enumerate(variants):
        make_repository(repo, work.model_dir, engine=params,
                        engine_kind="KIND_GPU" if s.device == "cuda" else None,
                        profile=profile, preprocess_instances=s.preprocess_instances or None)
        for name in ("rerank_preprocess", "rerank_engine", "rerank_calibrate"):
            shutil.copy(repo / name / "config.pbtxt", s.logs / f"triton_{name}.config.pbtxt")
        ports = {"HTTP_PORT": free_port(), "GRPC_PORT": free_port(), "METRICS_PORT": free_port()}
        env = dict(os.environ, MODEL_REPOSITORY=str(repo), **{k: str(v) for k, v in ports.items()})
        argv = [a.replace("{repo}", str(repo)) for a in shlex.split(s.triton_start)] + ["--exit-timeout-secs=10"]
        log_path = s.logs / ("triton_server.log" if attempt == 0 else f"triton_server.{attempt}.log")
        server = ServerProcess(argv, log_path, env, pgid_file)
        http, grpc_url = f"127.0.0.1:{ports['HTTP_PORT']}", f"127.0.0.1:{ports['GRPC_PORT']}"
        last = attempt == len(variants) - 1
        # vLLM's engine took over 2 min to start on the H200 (benchmarks/gpu/NOTES.md): a slow start is not a failure
        left = deadline - time.monotonic()
        wait = left - 30 if last else min(s.triton_start_timeout, left - 60)
        try:
            startup = server.wait_ready(lambda: http_ok(f"http://{http}/v2/health/ready"), wait, "tritonserver")
        except (RuntimeError, TimeoutError) as exc:
            server.stop()
            result["attempts"].append({"variant": variant, "error": str(exc)[-1500:]})
            log(f"  tritonserver ({variant}) did not come up: {str(exc).splitlines()[0][:200]}")
            if last or deadline - time.monotonic() < 150:
                raise
            wait_gpu_free(baseline)
            continue
        except BaseException:  # the parent's SIGTERM (time budget): do not leave the server running
            server.stop()
            raise
        result["attempts"].append({"variant": variant, "startup_s": round(startup, 1)})
        result.update(variant=variant, engine_parameters=params, command=shlex.join(argv),
                      startup_s=round(startup, 1), repository=str(repo))
        log(f"  tritonserver ({variant}) ready in {result['startup_s']} s")
        break
    outputs = [grpcmod.InferRequestedOutput(n) for n in ("SCORES", "RAW_SCORES", "RANKING", "TRUNCATED")]
    try:
        prepared = {}

        def inputs(k: int):
            if k not in prepared:
                r = work.requests[k]
                prepared[k] = build_inputs(grpcmod, r.query, list(r.documents), top_n=r.top_n)
            return prepared.pop(k)

        for k in range(len(work.requests)):  # all InferInputs built before the clock starts
            prepared[k] = inputs(k)

        async def main():
            client = grpcaio.InferenceServerClient(url=grpc_url)
            try:
                async def infer(k: int):
                    res = await client.infer("reranker", inputs(k), outputs=outputs)
                    n = len(work.requests[k].documents)
                    scores, ranking = res.as_numpy("SCORES")[0], res.as_numpy("RANKING")[0]
                    if scores.shape[0] != n or ranking.shape[0] != min(work.requests[k].top_n, n):
                        raise RuntimeError(f"bad shapes {scores.shape} {ranking.shape}")
                    if int(res.as_numpy("TRUNCATED")[0, 0]) != 0:
                        raise RuntimeError("pairs truncated")
                    return res

                async def send(k: int):
                    await infer(k)

                async def probe(k: int):
                    res = await infer(k)
                    return [float(x) for x in np.asarray(res.as_numpy("RAW_SCORES")[0])]

                def between(when, before=None, level=None):
                    time.sleep(0.5)  # let the last batch's statistics land
                    now = _triton_stats(http)
                    return now if when == "before" else _stats_delta(before, now, level)

                await drive(s, work, send, probe, result, deadline, between)
            finally:
                await client.close()

        asyncio.run(main())
        result["workload"] = work.describe()
    finally:
        server.stop()
        result["total_s"] = round(time.monotonic() - t_start, 1)
        tail = server.tail(4000)
        if "error" in tail.lower():
            result["server_log_tail"] = tail[-2000:]


def run_child(system: str, s: Settings, result_path: Path, pgid_file: Path) -> int:
    result = {"system": system, "status": "error", "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    t0 = time.monotonic()

    def on_term(signum, frame):
        raise SystemExit(f"terminated by signal {signum} (time budget)")

    signal.signal(signal.SIGTERM, on_term)
    try:
        if system == "build":
            child_build(s, result)
        elif system == "matmul":
            child_matmul(s, result)
        elif system == "hf":
            child_hf(s, result)
        elif system == "vllm":
            child_vllm(s, result, pgid_file)
        elif system == "triton":
            child_triton(s, result, pgid_file)
        else:
            raise ValueError(system)
        cut = result.get("skipped_levels") or any(not lv["complete"] for lv in result.get("levels", []))
        result["status"] = "partial" if cut else "ok"
    except BaseException as exc:  # noqa: BLE001 - the parent records it and goes on
        result["error"] = f"{type(exc).__name__}: {exc}"[-4000:]
        result["traceback"] = traceback.format_exc()[-6000:]
        log(f"  {system} failed: {result['error'][:500]}")
    result["seconds"] = round(time.monotonic() - t0, 1)
    result_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0 if result["status"] != "error" else 1


# ---------------------------------------------------------------------------------------------------------------
# Parent: orchestration, merge, plot, table


def run_system(system: str, s: Settings, budget: float) -> dict:
    logs = s.logs
    result_path = logs / f"{system}.result.json"
    pgid_file = logs / f"{system}.pgids"
    for p in (result_path, pgid_file):
        p.unlink(missing_ok=True)
    pgid_file.touch()
    settings_path = logs / "settings.json"
    child_settings = s.to_json()
    child_settings["budgets"] = dict(s.budgets, **{system: budget})  # the child plans its own deadline from this
    settings_path.write_text(json.dumps(child_settings, indent=1) + "\n")
    log(f"{system}: start (budget {budget:.0f} s)")
    with MemoryPoller() as mem, (logs / f"{system}.log").open("w") as out:
        proc = subprocess.Popen([sys.executable, "-u", __file__, "--child", system, "--settings", str(settings_path),
                                 "--result", str(result_path), "--pgids", str(pgid_file)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

        def pump():
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if line.startswith("[bench"):
                    print(line, end="", flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            log(f"{system}: over its {budget:.0f} s budget, stopping it")
            kill_group(proc.pid, 30, proc)
            proc.wait()
        reader.join(timeout=10)
    for line in pgid_file.read_text().split():  # servers a killed child could not stop
        kill_group(int(line), 10)
    kill_group(proc.pid, 5, proc)
    wait_gpu_free(mem.baseline)
    if result_path.is_file():
        result = json.loads(result_path.read_text())
    else:
        result = {"system": system, "status": "error", "error": f"no result (exit {proc.returncode}; over budget?)"}
        tail = (logs / f"{system}.log").read_text(errors="replace")[-3000:]
        result["log_tail"] = tail
    result["gpu_memory"] = mem.report()
    log(f"{system}: {result['status']} in {result.get('seconds', '?')} s"
        + (f" - {result.get('error', '')[:300]}" if result["status"] == "error" else ""))
    return result


def ceiling(results: dict) -> tuple[float, str]:
    m = results.get("matmul", {})
    if m.get("status") == "ok" and m.get("flops_per_s"):
        return m["flops_per_s"], f"measured {m['tflops']} TFLOP/s ({m['dtype']}, {m['n']}^3, {m['device']})"
    return NOMINAL_BF16_FLOPS, "nominal 790 TFLOP/s (no matmul measured)"


def finish_levels(results: dict) -> None:
    rate, _ = ceiling(results)
    for name in LOAD_SYSTEMS:
        for level in results.get(name, {}).get("levels", []):
            level["ceiling_share"] = round(level["useful_flops_per_s"] / rate, 4)
            level["useful_tflops"] = round(level["useful_flops_per_s"] / 1e12, 2)


def cross_check(results: dict) -> dict:
    """Raw scores of the probe requests, system against system."""
    import numpy as np

    probes = {n: results[n]["probe"] for n in LOAD_SYSTEMS if results.get(n, {}).get("probe")}
    out = {}
    names = list(probes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diffs, rhos, overlaps = [], [], []
            for pa, pb in zip(probes[a], probes[b]):
                x, y = np.asarray(pa["raw"]), np.asarray(pb["raw"])
                if x.shape != y.shape:
                    continue
                diffs.append(float(np.max(np.abs(x - y))))
                rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
                rhos.append(float(np.corrcoef(rx, ry)[0, 1]) if len(x) > 1 else 1.0)
                k = min(10, len(x))
                overlaps.append(len(set(np.argsort(-x)[:k]) & set(np.argsort(-y)[:k])) / k)
            if diffs:
                out[f"{a}~{b}"] = {"max_abs_raw_diff": round(max(diffs), 5), "spearman_min": round(min(rhos), 4),
                                   "top10_overlap_min": round(min(overlaps), 3),
                                   "raw_std": round(float(np.std(probes[a][0]["raw"])), 5)}
    return out


def plot(results: dict, path: Path, title: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib missing: no plot"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = {"triton": "tab:blue", "vllm": "tab:orange", "hf": "tab:green"}
    for name in LOAD_SYSTEMS:
        levels = results.get(name, {}).get("levels") or []
        if not levels:
            continue
        c = [lv["concurrency"] for lv in levels]
        ax1.plot(c, [lv["pairs_per_s"] for lv in levels], "o-", color=colors[name], label=LABELS[name])
        ax2.plot(c, [lv["latency_ms"]["p50"] for lv in levels], "o-", color=colors[name], label=f"{LABELS[name]} P50")
        ax2.plot(c, [lv["latency_ms"]["p99"] for lv in levels], "s--", color=colors[name], label=f"{LABELS[name]} P99")
    rate, _ = ceiling(results)
    work = next((results[n]["workload"] for n in LOAD_SYSTEMS if results.get(n, {}).get("workload")), None)
    if work:
        ceiling_pairs = rate / work["flop_per_token"] / work["tokens_per_pair_mean"]
        ax1.axhline(ceiling_pairs, color="gray", ls=":", label=f"FLOP ceiling ({ceiling_pairs:.0f} pairs/s)")
    ticks = sorted({lv["concurrency"] for n in LOAD_SYSTEMS for lv in results.get(n, {}).get("levels") or []})
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        if ticks:
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("concurrent requests")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("pairs / s")
    ax1.set_title("throughput")
    ax2.set_yscale("log")
    ax2.set_ylabel("latency (ms)")
    ax2.set_title("latency P50 (solid) / P99 (dashed)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def table(results: dict) -> str:
    rate, how = ceiling(results)
    lines = [f"FLOP ceiling: {how}"]
    work = next((results[n]["workload"] for n in LOAD_SYSTEMS if results.get(n, {}).get("workload")), None)
    if work:
        lines.append(f"load: {work['docs_per_request']} docs x {work['tokens_per_pair_mean']} tokens/pair "
                     f"({work['tokens_per_pair_min']}-{work['tokens_per_pair_max']}), top_n {work['top_n']}, "
                     f"{work['flop_per_token'] / 1e9:.4g} GFLOP/token")
    hdr = (f"{'system':<8}{'conc':>5}{'req':>6}{'pairs/s':>9}{'tok/s':>9}{'%ceil':>7}{'p50ms':>9}{'p95ms':>9}"
           f"{'p99ms':>9}{'memGiB':>8}{'pre+cal':>8}{'engine':>7}")
    lines.append(hdr)
    for name in LOAD_SYSTEMS:
        r = results.get(name)
        if not r:
            continue
        if r.get("status") == "error" and not r.get("levels"):
            lines.append(f"{name:<8} ERROR {r.get('error', '')[:110]}")
            continue
        mem = r.get("gpu_memory", {}).get("peak_over_baseline_mib")
        if name == "hf" and r.get("torch_max_memory_allocated_mib") is not None:
            mem = r["torch_max_memory_allocated_mib"]
        mem_s = f"{mem / 1024:.1f}" if mem is not None else "-"
        for lv in r.get("levels", []):
            lat = lv["latency_ms"]
            ts = lv.get("triton_stats", {})
            pre = f"{ts['share_pre_calibrate'] * 100:.1f}%" if ts else ""
            eng = f"{ts['share_engine'] * 100:.0f}%" if ts else ""
            flag = "" if lv["complete"] and not lv["errors"] else "*"
            lines.append(f"{name:<8}{lv['concurrency']:>5}{str(lv['requests']) + flag:>6}{lv['pairs_per_s']:>9.1f}"
                         f"{lv['tokens_per_s']:>9}{lv.get('ceiling_share', 0) * 100:>6.1f}%"
                         f"{lat['p50'] or 0:>9.1f}{lat['p95'] or 0:>9.1f}{lat['p99'] or 0:>9.1f}"
                         f"{mem_s:>8}{pre:>8}{eng:>7}")
        extra = []
        if r.get("startup_s") is not None:
            extra.append(f"startup {r['startup_s']} s")
        if name == "vllm" and r.get("levels"):
            rates = [lv["prefix_cache_hit_rate"] for lv in r["levels"] if lv.get("prefix_cache_hit_rate") is not None]
            if rates:
                extra.append(f"prefix-cache hit {min(rates) * 100:.1f}-{max(rates) * 100:.1f}% of prompt tokens")
            extra.append(f"token-count mismatches {r.get('token_count_mismatches')}")
        if name == "hf" and r.get("padding_overhead") is not None:
            extra.append(f"padding +{r['padding_overhead'] * 100:.1f}% tokens")
        if r.get("status") != "ok":
            extra.append(f"status {r.get('status')}: {r.get('error', '')[:100]}")
        if extra:
            lines.append(f"{'':8}  " + "; ".join(extra))
    for pair, c in (results.get("cross_check") or {}).items():
        lines.append(f"scores {pair}: max|raw diff| {c['max_abs_raw_diff']} (raw std {c['raw_std']}), "
                     f"spearman >= {c['spearman_min']}, top-10 overlap >= {c['top10_overlap_min']}")
    lines.append("* = level incomplete (errors or time budget); %ceil = useful FLOP/s over the matmul rate; "
                 "pre+cal / engine = share of mean request latency (Triton stats)")
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_out")))
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench"), help="models, repository, merged results")
    ap.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    ap.add_argument("--tiny", action="store_true", help="2-layer models, 4 docs x 50 tokens, concurrency 1,2 (CPU)")
    ap.add_argument("--full-load", action="store_true", help="with --tiny: the real 64 x ~500-token requests")
    ap.add_argument("--model", choices=("qwen3", "xlmr"), default="qwen3")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--concurrency", default=None, help="default 1,8,32,64 (tiny: 1,2)")
    ap.add_argument("--min-requests", type=int, default=None, help="requests per level: max(2c, this); default 16")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--probe", type=int, default=2, help="requests whose scores are compared across systems")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--max-num-batched-tokens", type=int, default=32768)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.45)
    ap.add_argument("--request-timeout", type=float, default=120)
    ap.add_argument("--budget", action="append", default=[], metavar="SYSTEM=SECONDS",
                    help="time budget per system (defaults: build 90, matmul 45, triton 330, vllm 240, hf 150)")
    ap.add_argument("--triton-start", default=None,
                    help="command starting tritonserver in the foreground; {repo} is replaced by the repository, "
                         "env MODEL_REPOSITORY, HTTP_PORT, GRPC_PORT, METRICS_PORT are set; default "
                         "'bash benchmarks/gpu/start_triton_gpu.sh {repo}' on a GPU, scripts/start_server.sh on a CPU")
    ap.add_argument("--vllm-python", default=sys.executable)
    ap.add_argument("--engine-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra rerank_engine parameter for the Triton run, e.g. engine_args={...}")
    ap.add_argument("--vllm-arg", action="append", default=[], help="extra argument for the vllm api_server")
    ap.add_argument("--no-triton-fallback", dest="triton_fallback", action="store_false",
                    help="no second try with the engine core in the stub's process if the first start fails")
    ap.add_argument("--triton-start-timeout", type=float, default=240, help="first try's readiness timeout")
    ap.add_argument("--preprocess-instances", type=int, default=0, help="rerank_preprocess instance count (Triton)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds for the whole invocation: later systems get what is left")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--settings", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--pgids", type=Path, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def settings_from(args) -> Settings:
    device = args.device
    if device == "auto":
        device = "cuda" if gpu_memory_used_mib() else "cpu"
    budgets = {"build": 90, "matmul": 45, "hf": 150, "vllm": 240, "triton": 330}
    if args.tiny:
        budgets = {"build": 120, "matmul": 60, "hf": 120, "vllm": 300, "triton": 400}
    for item in args.budget:
        k, _, v = item.partition("=")
        budgets[k] = float(v)
    triton_start = args.triton_start
    if triton_start is None:
        gpu_script = ROOT / "benchmarks" / "gpu" / "start_triton_gpu.sh"
        triton_start = f"bash {gpu_script} {{repo}}" if device == "cuda" and gpu_script.is_file() else \
            f"bash {ROOT / 'scripts' / 'start_server.sh'}"
    conc = args.concurrency or ("1,2" if args.tiny else "1,8,32,64")
    return Settings(
        out=args.out.resolve(), work=args.work.resolve(), tiny=args.tiny, model=args.model, device=device,
        concurrency=[int(c) for c in conc.split(",") if c.strip()],
        min_requests=args.min_requests if args.min_requests is not None else (4 if args.tiny else 16),
        warmup=args.warmup, probe=args.probe, max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens, gpu_memory_utilization=args.gpu_memory_utilization,
        dtype="bfloat16" if device == "cuda" else "float32", request_timeout_s=args.request_timeout,
        budgets=budgets, triton_start=triton_start, vllm_python=args.vllm_python,
        engine_set=dict(item.partition("=")[::2] for item in args.engine_set), vllm_args=list(args.vllm_arg),
        preprocess_instances=args.preprocess_instances, triton_fallback=args.triton_fallback,
        triton_start_timeout=args.triton_start_timeout, full_load=args.full_load,
    )


def export(s: Settings, results: dict, final: bool) -> None:
    """What comes back from the device: at most 8 files in $OUT (benchmark.json, table.txt, benchmark.png,
    bench_logs.tar.gz); called after every system, so a call killed at its limit still returns what was done."""
    import tarfile

    finish_levels(results)
    if final:
        try:
            results["cross_check"] = cross_check(results)
        except Exception as exc:  # noqa: BLE001
            results["cross_check"] = {"error": str(exc)}
    merged = s.work / ("results-tiny.json" if s.tiny else "results.json")
    text = json.dumps(results, indent=1, default=str) + "\n"
    merged.write_text(text)
    s.out.mkdir(parents=True, exist_ok=True)
    (s.out / "benchmark.json").write_text(text)
    with tarfile.open(s.out / "bench_logs.tar.gz", "w:gz") as tar:
        for f in sorted(s.logs.glob("*")):
            if f.is_file() and f.stat().st_size <= 4 << 20:
                tar.add(f, arcname=f"logs/{f.name}")
            elif f.is_file():  # keep the head and the tail of a huge log
                data = f.read_bytes()
                cut = s.logs / f"{f.name}.cut"
                cut.write_bytes(data[: 1 << 20] + b"\n[... cut ...]\n" + data[-(2 << 20):])
                tar.add(cut, arcname=f"logs/{f.name}")
                cut.unlink()
    if final:
        title = (f"{s.model_dir.name} ({'tiny, ' if s.tiny else ''}{s.dtype}), "
                 f"{s.shape.n_docs} docs x ~{s.shape.doc_tokens} tokens, {ceiling(results)[1]}")
        note = plot(results, s.out / "benchmark.png", title)
        if note:
            log(note)
        (s.out / "table.txt").write_text(table(results) + "\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        s = Settings.from_json(json.loads(args.settings.read_text()))
        return run_child(args.child, s, args.result, args.pgids)
    t_begin = time.monotonic()
    s = settings_from(args)
    s.logs.mkdir(parents=True, exist_ok=True)
    merged_path = s.work / ("results-tiny.json" if s.tiny else "results.json")
    results = json.loads(merged_path.read_text()) if merged_path.is_file() else {}
    results.pop("cross_check", None)
    systems = [x.strip() for x in args.systems.split(",") if x.strip()]
    if "rest" in systems:  # what an earlier invocation (same --work) did not finish, e.g. for a second device call
        rest = ["build"] + [x for x in ALL_SYSTEMS[1:] if results.get(x, {}).get("status") not in ("ok", "partial")]
        i = systems.index("rest")
        systems = list(dict.fromkeys(systems[:i] + rest + systems[i + 1:]))
    log(f"device {s.device}, systems {systems}, model {s.model_dir}, plan {s.plan()}, out {s.out}"
        + (f", deadline {args.deadline:.0f} s" if args.deadline else ""))
    for system in systems:
        if system not in ALL_SYSTEMS:
            log(f"unknown system {system!r}, skipped")
            continue
        budget = s.budgets[system]
        if args.deadline:
            budget = min(budget, args.deadline - (time.monotonic() - t_begin) - 15)
            if budget < 20:
                results[system] = {"system": system, "status": "error", "error": "no time left (--deadline)"}
                log(f"{system}: skipped, no time left")
                continue
        try:
            results[system] = run_system(system, s, budget)
        except Exception as exc:  # noqa: BLE001
            results[system] = {"system": system, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
        results["settings"] = s.to_json()
        export(s, results, final=False)
    export(s, results, final=True)
    print(table(results), flush=True)
    return 0 if all(results.get(x, {}).get("status") in ("ok", "partial") for x in systems if x in ALL_SYSTEMS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
