"""A Hugging Face hub cache the benchmark fills itself, so the committed configuration's model ids resolve offline.

The committed GPU configuration names hub ids (``Qwen/Qwen3-Reranker-0.6B``, ``BAAI/bge-reranker-v2-m3``). With
``HF_HOME`` pointing here and ``HF_HUB_OFFLINE=1``, transformers and vLLM resolve such an id to
``$HF_HOME/hub/models--<org>--<name>/snapshots/<revision>/`` through ``refs/main``: the benchmark writes its
random-weight checkpoints exactly there and no configuration file is rewritten.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REVISION_SEED = "triton-vllm-reranker benchmark random weights"


def revision(hub_id: str) -> str:
    """A fixed 40-hex revision per model id (what a commit hash looks like to huggingface_hub)."""
    return hashlib.sha1(f"{REVISION_SEED} {hub_id}".encode()).hexdigest()


def repo_dir(hf_home: Path, hub_id: str) -> Path:
    return hf_home / "hub" / ("models--" + hub_id.replace("/", "--"))


def snapshot_dir(hf_home: Path, hub_id: str) -> Path:
    """The folder a checkpoint for `hub_id` is written into; refs/main is made to point at it."""
    repo = repo_dir(hf_home, hub_id)
    rev = revision(hub_id)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    path = repo / "snapshots" / rev
    path.mkdir(parents=True, exist_ok=True)
    return path


def offline_env(hf_home: Path) -> dict[str, str]:
    """The environment under which hub ids resolve to this cache only."""
    return {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def use(hf_home: Path) -> None:
    """Point this process (and its children) at the cache."""
    os.environ.update(offline_env(hf_home))
