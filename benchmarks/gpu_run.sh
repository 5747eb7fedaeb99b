#!/usr/bin/env bash
# The benchmark on a GPU host without network (written for an H200 with a Python 3.12 venv holding torch 2.11 at
# /opt/torch/.venv; VPY names another python), run from the repository root with the kit of one vLLM version copied
# beside it (.gpu/kit-<version>/ and .gpu/kit-common/, made by tools/offline_gpu/make_kit.sh):
#   1 installs the kit (tools/offline_gpu/install_kit.sh)   2 per model: builds the random-weight checkpoint into an
#   HF cache under the committed model id, then runs benchmarks/run_gpu_benchmark.py: the Triton ensemble on the
#   COMMITTED GPU configuration (--model-config-name, no file rewritten; gRPC and HTTP probe scores), the direct
#   AsyncLLM (the scores it must equal), and the other systems asked for, within BENCH_DEADLINE.
# Results go to $OUT (default /tmp/bench_out): run.log, <model>.benchmark.json, <model>.table.txt,
# <model>.benchmark.png, bench_logs.tar.gz (server logs, configs, perf_analyzer output of every model).
#
#   bash benchmarks/gpu_run.sh                                           # full benchmark, vLLM 0.26.0, Qwen3 shape
#   VLLM_VERSION=0.24.0 MODELS='qwen3 xlmr' SYSTEMS=build,triton,async_llm LEVELS=1,8 PERF= \
#     bash benchmarks/gpu_run.sh                                         # scores of both shapes on the image's vLLM
#   bash benchmarks/gpu_run.sh stash     # copy the kit parts present now to /tmp/gpukit, where install_kit.sh also
#                                        # looks: for parts that reach the host separately
#
# env: VLLM_VERSION (0.26.0)  MODELS ("qwen3"; also xlmr)  SYSTEMS (build,matmul,triton,async_llm,engine_step,vllm_same,
#      vllm_default,hf; parity: the model card's recipe in fp32)  LEVELS (1,8,32,64)  PERF (perf_analyzer levels, "8";
#      "" = none)  INVARIANCE (levels of the probes-under-load check, e.g. 1,8,32,64; "" = none)  SWEEP (";"-separated
#      KEY=JSON engine overrides or MODEL:KEY=VALUE Triton step parameters, one sweep point each)  CONFIG_POINTS
#      (space-separated committed config variants, e.g. gpu-fp8, one point each)  OVERLOAD (Triton at this multiple of
#      its last level's rate after the levels, 4; 0 = none)  ROUNDS (times each load system runs, alternated A B A B: 2)
#      BENCH_DEADLINE (seconds for all of it, 570)  STEP_PROBE (1: vLLM's steps timed in both systems'
#      processes, and the preprocess step's own time; <model>.steps.txt: benchmarks/step_report.py)  ENGINE_CPUS (with
#      STEP_PROBE, e.g. 14-15: the engine cores on those CPUs, the rest of the run on the others)  STEP_PROBE_PROFILE
#      (with STEP_PROBE, 1: each engine core's steps under cProfile, its top functions in <model>.steps.txt; slows
#      the steps it times)  BENCH_ARGS
# A run with ENGINE_CPUS or STEP_PROBE_PROFILE keeps its results apart from the plain runs' (its own --work folder,
# which a later invocation of the same conditions continues: SYSTEMS=rest, --no-base), at the price of building the
# checkpoint there once more (Qwen3 ~30 s).
set -uo pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "== [$(date +%H:%M:%S) +$(el)s] $*"; }
OUT=${OUT:-/tmp/bench_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export VLLM_VERSION=${VLLM_VERSION:-0.26.0}
MODELS=${MODELS:-qwen3}
SYSTEMS=${SYSTEMS:-build,matmul,triton,async_llm,engine_step,vllm_same,vllm_default,hf}
LEVELS=${LEVELS:-1,8,32,64}
PERF=${PERF-8}
INVARIANCE=${INVARIANCE:-}
OVERLOAD=${OVERLOAD:-4}
ROUNDS=${ROUNDS:-2}
DEADLINE=${BENCH_DEADLINE:-570}
VPY=${VPY:-/opt/torch/.venv/bin/python3}
[ -x "$VPY" ] || VPY=$(command -v python3)

if [ "${1:-}" = stash ]; then bash tools/offline_gpu/install_kit.sh --stash; exit; fi

main() {
say "gpu_run.sh vLLM $VLLM_VERSION models=[$MODELS] systems=$SYSTEMS levels=$LEVELS perf=[$PERF] invariance=[$INVARIANCE] overload=$OVERLOAD rounds=$ROUNDS sweep=[${SWEEP:-}] config points=[${CONFIG_POINTS:-}] deadline ${DEADLINE}s"
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
say "install_kit"
bash tools/offline_gpu/install_kit.sh || { say "install_kit FAILED"; return 1; }
# shellcheck disable=SC1091
source /tmp/kit_env.sh
export PYTHONPATH=$KIT_CLIENT_PATH:$ROOT
# The Triton stub ignores PYTHONPATH: the model.py files import `python_backends` from this checkout through a .pth
# file of the stub's environment (tools/offline_gpu/NOTES.md).
echo "$ROOT" > "$KIT_STUBENV/lib/python3.12/site-packages/zz_repo.pth"
if [ -n "${STEP_PROBE:-}" ]; then  # vLLM's steps timed in both systems' processes (benchmarks/step_probe.py)
  echo "import benchmarks.step_probe" > "$KIT_STUBENV/lib/python3.12/site-packages/zz_step_probe.pth"
  mkdir -p /tmp/step_probe_site && echo "import benchmarks.step_probe" > /tmp/step_probe_site/sitecustomize.py
  export PYTHONPATH=/tmp/step_probe_site:$PYTHONPATH
fi
# ENGINE_CPUS (taskset -c notation, with STEP_PROBE): both systems' engine cores on CPUs of their own, everything else
# of the run (the load, tritonserver and its stubs, the direct engine's front end) on the other CPUs
pin=()
if [ -n "${ENGINE_CPUS:-}" ]; then
  [ -n "${STEP_PROBE:-}" ] || { say "ENGINE_CPUS needs STEP_PROBE=1: the probe moves each engine core"; return 1; }
  export STEP_PROBE_ENGINE_CPUS=$ENGINE_CPUS
  others=$($VPY -c 'import os, sys; from benchmarks.step_probe import cpu_list
print(",".join(map(str, sorted(os.sched_getaffinity(0) - cpu_list(sys.argv[1])))))' "$ENGINE_CPUS")
  pin=(taskset -c "$others")
  say "engine cores on CPUs $ENGINE_CPUS, the rest on $others"
fi
# one compile cache per vLLM release for every engine of the run: the second compiled start of a model is a warm
# one; the JSON records how full it was at the start
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-/tmp/vllm_cache/$VLLM_VERSION}
# the steps read their engine's config file with tritonclient's ModelConfig (python_backends/model_repository.py)
(cd / && env -u PYTHONPATH "$KIT_STUBENV/bin/python3" -c 'import python_backends, sys, google.protobuf as pb; from tritonclient.grpc import model_config_pb2; print("stub python", sys.version.split()[0], python_backends.__file__, "protobuf", pb.__version__)') \
  || say "python_backends or tritonclient's ModelConfig not importable by the stub's python"
PYTHONPATH=$KIT_ENGINE_PATH $VPY -c 'import torch, triton, vllm; print("vllm", vllm.__version__, vllm.__file__, "torch", torch.__version__, torch.__file__, "triton", triton.__version__, "cuda", torch.cuda.is_available(), "nccl", torch.cuda.nccl.version())'
rc=0
n=$(echo $MODELS | wc -w)
sweep=()
IFS=';' read -ra points <<< "${SWEEP:-}"
for p in "${points[@]}"; do [ -n "$p" ] && sweep+=(--sweep "$p"); done
for p in ${CONFIG_POINTS:-}; do sweep+=(--config-point "$p"); done
for model in $MODELS; do
  left=$(( (DEADLINE - $(el) - 10) / n )); n=$((n - 1))
  say "benchmark $model (deadline ${left}s)"
  export STEP_PROBE_DIR=/tmp/step_probe/$model
  work=/tmp/bench/$VLLM_VERSION/$model${ENGINE_CPUS:+-engine-cpus-$ENGINE_CPUS}${STEP_PROBE_PROFILE:+-profiled}
  # shellcheck disable=SC2086
  "${pin[@]}" $VPY benchmarks/run_gpu_benchmark.py --model "$model" --out "/tmp/bench_out/$model" --work "$work" \
    --systems "$SYSTEMS" --concurrency "$LEVELS" --perf-analyzer "$PERF" --invariance "$INVARIANCE" --overload "$OVERLOAD" --rounds "$ROUNDS" --deadline "$left" --vllm-python "$VPY" \
    "${sweep[@]}" ${BENCH_ARGS:-} || rc=$?
  for f in benchmark.json table.txt benchmark.png; do
    [ -f "/tmp/bench_out/$model/$f" ] && cp "/tmp/bench_out/$model/$f" "$OUT/$model.$f"
  done
  if [ -n "${STEP_PROBE:-}" ]; then
    $VPY -m benchmarks.step_report "$STEP_PROBE_DIR" > "$OUT/$model.steps.txt" 2>&1
    tar -czf "$OUT/$model.step_probe.tar.gz" -C "$STEP_PROBE_DIR" . && rm -rf "$STEP_PROBE_DIR"
  fi
done
tar -czf "$OUT/bench_logs.tar.gz" -C /tmp/bench_out $(cd /tmp/bench_out && ls -d */bench_logs.tar.gz 2>/dev/null) 2>/dev/null
say "done rc=$rc"
return $rc
}

main 2>&1 | tee -a "$OUT/run.log"
exit "${PIPESTATUS[0]}"
