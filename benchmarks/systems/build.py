"""Random-weight checkpoints into the HF cache under the committed model ids (benchmarks/build_models.py), then the
workload generated and tokenized once for every later system (benchmarks/workload.py)."""

from __future__ import annotations

import json
import time

from benchmarks.procs import log
from benchmarks.settings import Settings
from benchmarks.workload import Workload


def run(s: Settings, result: dict, pgid_file=None) -> None:
    from benchmarks.build_models import build

    stamp = s.hf_home / "BUILD.json"
    t0 = time.perf_counter()
    built = json.loads(stamp.read_text()) if stamp.is_file() else {"models": {}}
    if s.model in built["models"] and (s.model_dir / "model.safetensors").is_file():
        result["skipped"] = "already built"
        result["build"] = built
    else:
        result["build"] = build(s.hf_home, [s.model], s.tiny, s.device, None, 0)
    result["build_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    result["workload"] = Workload(s).describe()
    result["workload_s"] = round(time.perf_counter() - t0, 2)
    log(f"  models {result['build_s']} s, workload {result['workload_s']} s: {result['workload']}")
