"""Generate a variant of ``model_repository/`` by rewriting parameters (never a hand-kept copy).

The four models' code (``1/model.py``), the ensemble and the calibration profiles are copied as they are; in
``config.pbtxt`` only the named ``parameters`` values and the engine's ``instance_group`` kind change, and every
rewrite must hit exactly once (a renamed key fails loudly instead of silently benchmarking the CPU defaults).

    python -m benchmarks.gpu_repo --out /tmp/bench/repo --model /tmp/bench/models/qwen3-reranker-0.6b-random \
        --gpu --profile sigmoid --score-type yes_no_logit

GPU defaults (``--gpu``): KIND_GPU, bfloat16, gpu_memory_utilization 0.45, max_num_batched_tokens 32768,
max_model_len 1024, enforce_eager true, engine_args {}, vllm_env {"VLLM_USE_FLASHINFER_SAMPLER": "0", ...}.
Without ``--gpu`` the CPU settings of the source repository stay (KIND_CPU, float32, its vllm_env).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "model_repository"
MODELS = ("reranker", "rerank_preprocess", "rerank_engine", "rerank_calibrate")

GPU_ENGINE = {
    "dtype": "bfloat16",
    "gpu_memory_utilization": "0.45",
    "max_num_batched_tokens": "32768",
    "max_model_len": "1024",
    "enforce_eager": "true",
    "engine_args": "{}",
    "vllm_env": json.dumps({"VLLM_USE_FLASHINFER_SAMPLER": "0", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}),
}


def _pbtxt_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def set_parameter(text: str, key: str, value: str) -> str:
    """Replace the string_value of parameter `key` (exactly one occurrence)."""
    pattern = re.compile(
        r'(\{\s*key:\s*"' + re.escape(key) + r'",\s*value:\s*\{\s*string_value:\s*")((?:[^"\\]|\\.)*)(")'
    )
    new, count = pattern.subn(lambda m: m.group(1) + _pbtxt_escape(value) + m.group(3), text)
    if count != 1:
        raise ValueError(f"parameter {key!r} found {count} times (expected 1)")
    return new


def set_instance_kind(text: str, kind: str) -> str:
    new, count = re.subn(r"kind:\s*KIND_\w+", f"kind: {kind}", text)
    if count != 1:
        raise ValueError(f"instance_group kind found {count} times (expected 1)")
    return new


def has_parameter(text: str, key: str) -> bool:
    return re.search(r'\{\s*key:\s*"' + re.escape(key) + r'"', text) is not None


def get_parameter(text: str, key: str) -> str:
    m = re.search(r'\{\s*key:\s*"' + re.escape(key) + r'",\s*value:\s*\{\s*string_value:\s*"((?:[^"\\]|\\.)*)"', text)
    if not m:
        raise KeyError(key)
    return m.group(1).replace('\\"', '"').replace("\\\\", "\\")


def set_instance_count(text: str, count: int) -> str:
    new, n = re.subn(r"(instance_group\s*\[\s*\{\s*count:\s*)\d+", lambda m: f"{m.group(1)}{count}", text)
    if n != 1:
        raise ValueError(f"instance_group count found {n} times (expected 1)")
    return new


def make_repository(out: Path, model: str, *, engine: dict[str, str] | None = None, engine_kind: str | None = None,
                    preprocess: dict[str, str] | None = None, profile: dict | None = None,
                    preprocess_instances: int | None = None, source: Path = SOURCE) -> Path:
    """Write the variant to `out` (replaced). `profile`: a calibration profile document to use instead."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    for name in MODELS:
        shutil.copytree(source / name, out / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    engine = dict(engine or {})
    engine["model"] = model
    cfg = out / "rerank_engine" / "config.pbtxt"
    text = cfg.read_text()
    if "model_sha256" not in engine and has_parameter(text, "model_sha256"):
        engine["model_sha256"] = "{}"  # the source pins the default model's bytes; another model has other bytes
    for key, value in engine.items():
        text = set_parameter(text, key, value)
    if engine_kind:
        text = set_instance_kind(text, engine_kind)
    cfg.write_text(text)

    pre = dict(preprocess or {})
    pre["model"] = model
    pre.setdefault("max_model_len", get_parameter(text, "max_model_len"))  # must equal the engine's
    cfg = out / "rerank_preprocess" / "config.pbtxt"
    ptext = cfg.read_text()
    for key, value in pre.items():
        ptext = set_parameter(ptext, key, value)
    if preprocess_instances:
        ptext = set_instance_count(ptext, preprocess_instances)
    cfg.write_text(ptext)

    if profile is not None:
        rel = f"profiles/{profile['name']}.json"
        (out / "rerank_calibrate" / rel).write_text(json.dumps(profile, indent=2) + "\n")
        cfg = out / "rerank_calibrate" / "config.pbtxt"
        cfg.write_text(set_parameter(cfg.read_text(), "calibration_profile", rel))
    return out


def bench_profile(method: str, score_type: str, model: str) -> dict:
    return {"schema_version": 1, "name": f"bench-{method}", "version": "benchmark", "model": model,
            "score_type": score_type, "method": method, "params": {}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--model", required=True, help="model folder (absolute path) for preprocess and engine")
    ap.add_argument("--gpu", action="store_true", help="KIND_GPU and the GPU engine settings")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="engine parameter override")
    ap.add_argument("--profile", choices=("keep", "identity", "sigmoid"), default="keep")
    ap.add_argument("--score-type", default="yes_no_logit")
    args = ap.parse_args(argv)
    engine = dict(GPU_ENGINE) if args.gpu else {}
    for item in args.set:
        key, _, value = item.partition("=")
        engine[key] = value
    profile = None if args.profile == "keep" else bench_profile(args.profile, args.score_type, args.model)
    make_repository(args.out, args.model, engine=engine, engine_kind="KIND_GPU" if args.gpu else None, profile=profile)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
