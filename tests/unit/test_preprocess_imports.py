"""The preprocess step runs in a Triton stub process of its own per instance: it must not import transformers or
torch (with them come scikit-learn and scipy: ~3.7 s and ~400 MB more per process), neither when its model.py's
modules are imported nor when it reads its checkpoint and tokenizes. Checked in a fresh interpreter."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL_PY = ROOT / "model_repository" / "rerank_preprocess" / "1" / "model.py"
HEAVY = ("torch", "transformers")
PROBE = """
import importlib, json, sys
for module in json.loads(sys.argv[1]):
    importlib.import_module(module)
if sys.argv[2] == "serve":
    import numpy as np
    from python_backends.model_repository import PREPROCESS, REPOSITORY, VariantModel
    from python_backends.preprocess.settings import PreprocessSettings
    from python_backends.preprocess.step import Preprocessor
    parameters = {"engine_config": "../rerank_engine/config.pbtxt", "long_documents": "truncate", "max_documents": "8",
                  "max_document_bytes": "4096", "max_query_bytes": "1024", "batch_token_budget": "65536",
                  "tokenizer_threads": "1"}
    config = {"name": "rerank_preprocess", "parameters": {k: {"string_value": v} for k, v in parameters.items()}}
    settings = PreprocessSettings.from_model_config(config, VariantModel.for_step(REPOSITORY / PREPROCESS, config))
    preprocess = Preprocessor.from_settings(settings)
    preprocess(np.array([[b"bread"]], dtype=object), np.array([[b"ovens bake bread"]], dtype=object))
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(sys.argv[3])))))
"""


def step_modules() -> list[str]:
    """The repository's modules the step's model.py imports (Triton's own, triton_python_backend_utils, aside)."""
    tree = ast.parse(MODEL_PY.read_text())
    return sorted({node.module for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("python_backends")})


def heavy_modules_after(stage: str) -> list[str]:
    modules = ["python_backends.preprocess", *step_modules()]
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(modules), stage, json.dumps(HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_step_modules_are_those_model_py_imports():
    assert "python_backends.preprocess.step" in step_modules() and "python_backends.preprocess.settings" in step_modules()


def test_importing_the_step_imports_neither_torch_nor_transformers():
    assert heavy_modules_after("import") == []


def test_reading_the_checkpoint_and_tokenizing_import_neither_torch_nor_transformers():
    assert heavy_modules_after("serve") == []
