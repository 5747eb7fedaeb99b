"""The benchmark's steps and systems, one module each, behind one registry (name -> System).

Steps prepare (``build``: checkpoints and workload; ``matmul``: the FLOP ceiling; ``parity``: the model card's
recipe in fp32 on the probe requests, the scores every system is compared with); load systems serve the same
requests and report levels: ``triton`` (this ensemble), ``async_llm`` (the direct engine, the ceiling),
``engine_step`` (the ensemble's engine step without Triton), ``vllm_same`` / ``vllm_default`` (``vllm serve`` with
the same settings / as a user starts it), ``hf`` (a transformers loop). Each runs in its own child process of
benchmarks/run_gpu_benchmark.py with a time budget."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from benchmarks.systems import async_llm, build, engine_step, hf_loop, matmul, parity, triton_ensemble, vllm_serve


@dataclass(frozen=True)
class System:
    name: str
    label: str
    run: Callable  # run(settings, result, pgid_file): fills `result`
    load: bool = True  # False for the preparation steps (no levels)


SYSTEMS: dict[str, System] = {s.name: s for s in (
    System("build", "models + workload", build.run, load=False),
    System("matmul", "bf16 matmul ceiling", matmul.run, load=False),
    System("parity", "model card recipe, fp32", parity.run, load=False),
    System("triton", "Triton ensemble (gRPC)", triton_ensemble.run),
    System("async_llm", "vLLM AsyncLLM in-process", async_llm.run),
    System("engine_step", "engine step, no Triton", engine_step.run),
    System("vllm_same", "vllm serve, same settings", functools.partial(vllm_serve.run, variant="vllm_same")),
    System("vllm_default", "vllm serve, its defaults", functools.partial(vllm_serve.run, variant="vllm_default")),
    System("hf", "transformers loop", hf_loop.run),
)}
LOAD_SYSTEMS = tuple(name for name, s in SYSTEMS.items() if s.load)
