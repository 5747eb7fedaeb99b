"""`tokenizer_threads` sizes the Rust tokenizer's thread pool of a preprocess instance (configs/gpu.pbtxt says why).
The pool is one per process and is built at the first batch, so each case runs in a fresh interpreter and counts
the threads that batch starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARAMS = {"engine_config": "../rerank_engine/config.pbtxt", "long_documents": "truncate", "max_documents": "1024", "max_document_bytes": "65536", "max_query_bytes": "4096",
          "batch_token_budget": "8388608"}
PROBE = """
import os, sys
import numpy as np
from python_backends.model_repository import PREPROCESS, REPOSITORY, VariantModel
from python_backends.preprocess.settings import PreprocessSettings
from python_backends.preprocess.step import Preprocessor, size_tokenizer_pool
config = {"name": "rerank_preprocess", "parameters": {k: {"string_value": v} for k, v in eval(sys.argv[1]).items()}}
settings = PreprocessSettings.from_model_config(config, VariantModel.for_step(REPOSITORY / PREPROCESS, config))
size_tokenizer_pool(settings.tokenizer_threads)  # as the step's initialize does
pre = Preprocessor.from_settings(settings)
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
docs = np.array([[f"document {i} about bread and ovens".encode() for i in range(256)]], dtype=object)
pre(np.array([[b"bread"]], dtype=object), docs)
print(threads() - before)
"""


def _started_threads(threads: str, env: dict[str, str] | None = None) -> int:
    params = {**PARAMS, "tokenizer_threads": threads}
    out = subprocess.run([sys.executable, "-c", PROBE, repr(params)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **(env or {})})
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


@pytest.mark.parametrize("threads", [1, 3])
def test_the_first_batch_starts_the_configured_number_of_tokenizer_threads_whatever_the_environment_says(threads):
    assert _started_threads(str(threads), {"RAYON_NUM_THREADS": "2"}) == threads


def test_zero_leaves_the_pool_as_the_environment_sizes_it():
    assert _started_threads("0", {"RAYON_NUM_THREADS": "2"}) == 2
