"""The benchmark's settings, shared by the parent and its children (as JSON), and the command line that makes them."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import corpus, engine_config, hf_cache
from benchmarks.build_models import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
# seconds per step; a step's child is stopped at its budget and the next one starts
# (GPU: an engine start took over 2 min in the first H200 probe, tools/offline_gpu/NOTES.md; the levels of one
# system take ~30-60 s; --deadline shares what is left among the later systems)
BUDGETS = {"build": 120, "matmul": 40, "parity": 90, "triton": 330, "async_llm": 160, "engine_step": 160,
           "vllm_same": 180, "vllm_default": 180, "hf": 100}
TINY_BUDGETS = {"build": 200, "matmul": 60, "parity": 150, "triton": 400, "async_llm": 300, "engine_step": 300,
                "vllm_same": 300, "vllm_default": 300, "hf": 150}


@dataclass
class Settings:
    out: Path
    work: Path
    tiny: bool
    model: str  # "qwen3" or "xlmr": which committed variant (build_models.VARIANTS) and checkpoint
    device: str  # "cuda" or "cpu"
    concurrency: list[int]
    min_requests: int
    warmup: int
    probe: int
    request_timeout_s: float
    budgets: dict[str, float]
    triton_start: str
    vllm_python: str
    point: str = "base"  # sweep point name; "base" = the committed engine_args unchanged
    override: dict = field(default_factory=dict)  # the point's one named engine argument
    config: str = ""  # the point's committed config name (--config-point); "" = the model's own variant
    full_load: bool = False  # --tiny models with the real load shape (64 docs x ~500 tokens)
    perf_levels: list[int] = field(default_factory=list)  # perf_analyzer concurrency levels (Triton system)
    perf_requests: int = 16  # distinct requests in perf_analyzer's input data
    overload_factor: float = 0.0  # Triton system: open-loop load at this multiple of the last level's rate (0: none)
    overload_s: float = 10.0
    invariance_levels: list[int] = field(default_factory=list)  # Triton system: probes alone vs under load at these

    @property
    def variant(self) -> str:
        """The committed config every system of this point reads: configs/<variant>.pbtxt."""
        return self.config or VARIANTS[self.model]

    @property
    def hf_home(self) -> Path:
        return self.work / ("hf-tiny" if self.tiny else "hf")

    @property
    def logs(self) -> Path:
        return self.work / ("logs-tiny" if self.tiny else "logs")

    @property
    def hub_id(self) -> str:
        return engine_config.engine_args(self.variant)["model"]

    @property
    def model_dir(self) -> Path:
        return hf_cache.snapshot_dir(self.hf_home, self.hub_id)

    def engine_args(self) -> dict:
        """The committed engine_args of the variant + the point's override (+ the CPU changes on a CPU)."""
        cpu = engine_config.CPU_ENGINE if self.device == "cpu" else {}
        return engine_config.engine_args(self.variant, {**cpu, **self.override})

    @property
    def shape(self) -> corpus.Shape:
        return corpus.TINY_SHAPE if self.tiny and not self.full_load else corpus.Shape()

    def plan(self) -> list[tuple[int, int]]:
        """Requests per level: 3 rounds at least, so the steady window (loadtest/closed_loop.py) holds one or more."""
        return [(c, max(3 * c, self.min_requests)) for c in self.concurrency]

    def total_requests(self) -> int:
        return self.probe + self.warmup + sum(n for _, n in self.plan())

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["out"], d["work"] = str(self.out), str(self.work)
        return d

    @classmethod
    def from_json(cls, d: dict) -> Settings:
        d = dict(d)
        d["out"], d["work"] = Path(d["out"]), Path(d["work"])
        return cls(**d)


def parse_args(argv=None, systems: tuple[str, ...] = ()):
    ap = argparse.ArgumentParser(description="reranker serving benchmark on one GPU (benchmarks/README.md)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_out")))
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench"), help="models, HF cache, merged results")
    ap.add_argument("--systems", default=",".join(systems), help=f"comma-separated, of {', '.join(systems)}, rest")
    ap.add_argument("--tiny", action="store_true", help="2-layer models, 4 docs x 50 tokens, concurrency 1,2 (CPU)")
    ap.add_argument("--full-load", action="store_true", help="with --tiny: the real 64 x ~500-token requests")
    ap.add_argument("--model", choices=tuple(VARIANTS), default="qwen3")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--concurrency", default=None, help="default 1,8,32,64 (tiny: 1,2)")
    ap.add_argument("--min-requests", type=int, default=None, help="requests per level: max(3c, this); default 48")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--probe", type=int, default=2, help="requests whose raw scores are compared across systems")
    ap.add_argument("--request-timeout", type=float, default=120)
    ap.add_argument("--budget", action="append", default=[], metavar="SYSTEM=SECONDS")
    ap.add_argument("--triton-start", default=None,
                    help="command starting tritonserver in the foreground; {repo} and {config} are replaced, env "
                         "HTTP_PORT, GRPC_PORT, METRICS_PORT are set; default tools/offline_gpu/start_triton_gpu.sh "
                         "on a GPU, scripts/start_server.sh on a CPU")
    ap.add_argument("--vllm-python", default=sys.executable)
    ap.add_argument("--sweep", action="append", default=[], metavar="KEY=JSON",
                    help="one sweep point per use: the committed engine_args plus this one override "
                         "(e.g. max_num_batched_tokens=32768, quantization=\"fp8\"), or one parameter of a "
                         "Triton step, MODEL:KEY=VALUE (e.g. rerank_preprocess:tokenizer_threads=4); 'base' runs first")
    ap.add_argument("--config-point", action="append", default=[], metavar="NAME",
                    help="one point per use: a committed config variant as it is (e.g. gpu-fp8: Triton with "
                         "--model-config-name=NAME on model_repository/, the in-process systems with its engine_args); "
                         "its probe scores are compared with the base point's")
    ap.add_argument("--no-base", dest="base", action="store_false",
                    help="with --sweep or --config-point: run only those points (the base point's results from an "
                         "earlier invocation with the same --work stay)")
    ap.add_argument("--perf-analyzer", default="", metavar="LEVELS",
                    help="perf_analyzer concurrency levels against the Triton server, e.g. 8,32 (empty: none)")
    ap.add_argument("--overload", type=float, default=0.0, metavar="FACTOR",
                    help="after the levels, the Triton system sends FACTOR x the last level's request rate for 10 s "
                         "(benchmarks/systems/overload.py); 0: none")
    ap.add_argument("--invariance", default="", metavar="LEVELS",
                    help="after the levels, the Triton system scores probe requests alone and beside other load at "
                         "these concurrency levels, e.g. 1,8,32,64 (benchmarks/systems/invariance.py; empty: none)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="times each load system runs, in alternation (A B A B), its levels the median of its rounds "
                         "(benchmarks/rounds.py); default 2 (tiny: 1)")
    ap.add_argument("--deadline", type=float, default=None, help="seconds for the whole invocation")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--settings", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--pgids", type=Path, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def settings_from(args, device: str) -> Settings:
    budgets = dict(TINY_BUDGETS if args.tiny else BUDGETS)
    for item in args.budget:
        k, _, v = item.partition("=")
        budgets[k] = float(v)
    triton_start = args.triton_start
    if triton_start is None:
        gpu_script = ROOT / "tools" / "offline_gpu" / "start_triton_gpu.sh"
        script = gpu_script if device == "cuda" else ROOT / "scripts" / "start_server.sh"
        triton_start = f"bash {script} {{repo}} --model-config-name={{config}}" if device == "cuda" else \
            f"bash {script} --model-config-name={{config}}"
    conc = args.concurrency or ("1,2" if args.tiny else "1,8,32,64")
    return Settings(
        out=args.out.resolve(), work=args.work.resolve(), tiny=args.tiny, model=args.model, device=device,
        concurrency=levels(conc),
        min_requests=args.min_requests if args.min_requests is not None else (8 if args.tiny else 48),
        warmup=args.warmup, probe=args.probe, request_timeout_s=args.request_timeout, budgets=budgets,
        triton_start=triton_start, vllm_python=args.vllm_python, full_load=args.full_load,
        perf_levels=levels(args.perf_analyzer), overload_factor=args.overload,
        invariance_levels=levels(args.invariance),
    )


def levels(text: str) -> list[int]:
    return [int(c) for c in text.split(",") if c.strip()]
