"""The model card's own recipe (reranker_model/parity.py: transformers in fp32, nothing of the serving code) on the
probe requests, on the benchmark's device: the reference the report compares every system's probe raw scores with
(``parity~triton``, ``parity~triton@gpu-deterministic``, ...). Runs once, before or after the load systems."""

from __future__ import annotations

import time

from benchmarks.procs import log
from benchmarks.settings import Settings
from benchmarks.workload import Workload


def run(s: Settings, result: dict, pgid_file=None) -> None:
    from reranker_model.parity import reference_for

    work = Workload(s)
    t0 = time.perf_counter()
    reference = reference_for(work.model_dir, work.max_model_len, s.device)
    result.update(load_s=round(time.perf_counter() - t0, 2), recipe=type(reference).__name__, dtype="float32")
    t0 = time.perf_counter()
    result["probe"] = [{"request": k, "raw": reference.scores(r.query, list(r.documents), r.instruction).tolist()}
                       for k, r in enumerate(work.requests[: s.probe])]
    result["score_s"] = round(time.perf_counter() - t0, 2)
    log(f"  {result['recipe']} on {s.device}: loaded in {result['load_s']} s, {s.probe} probe requests in "
        f"{result['score_s']} s")
