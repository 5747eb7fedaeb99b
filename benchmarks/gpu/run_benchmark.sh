#!/usr/bin/env bash
# The benchmark's device call on one H200, from the repo root. Installs the carry kit (install_kit.sh), then runs
# benchmarks/run_gpu_benchmark.py (Triton ensemble vs vllm serve vs transformers loop, matmul ceiling) and/or the
# GPU-vs-CPU check of the embedded default model (tests/gpu/check_gpu_vs_cpu.py). Everything lands in $OUT
# (<= 8 files: run.log, benchmark.json, benchmark.png, table.txt, bench_logs.tar.gz, check_gpu_vs_cpu.json).
#
#   bash benchmarks/gpu/run_benchmark.sh                 # call 1, carry [".gpu/kit", ".gpu/bench_whl"]: ~6-9 min
#   bash benchmarks/gpu/run_benchmark.sh check,rest      # call 2 within 30 s, carry [".gpu/minilm"]: the check,
#                                                        #   then the systems call 1 did not finish ("rest")
#   bash benchmarks/gpu/run_benchmark.sh build,matmul,hf # any subset of build,matmul,triton,vllm,hf,rest,check
# The default steps end with "check", which runs only where .gpu/minilm (or /tmp/minilm-stash) is there.
#
# env: BENCH_DEADLINE  seconds this script may use in all (default 570; the call's limit is 600)
#      BENCH_ARGS      more arguments for run_gpu_benchmark.py (e.g. "--model xlmr", "--budget vllm=150")
#      VPY             the image's python (default /opt/torch/.venv/bin/python3)
set -uo pipefail
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
OUT=${OUT:-/tmp/bench_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
STEPS=${1:-build,matmul,triton,vllm,hf,check}
EXPLICIT_CHECK=$([ "${1:-}" != "" ] && echo "$1" | tr ',' '\n' | grep -qx check && echo 1 || echo 0)
KD=${KIT_DEST:-/tmp}
DEADLINE=${BENCH_DEADLINE:-570}
VPY=${VPY:-/opt/torch/.venv/bin/python3}
[ -x "$VPY" ] || VPY=$(command -v python3)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

main() {
echo "== [$(el)s] run_benchmark.sh steps=$STEPS deadline=${DEADLINE}s"
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv 2>&1 | head -3

if [ -f $KD/site/.kit_complete ] && [ -f $KD/pytriton/.kit_complete ] && [ -f $KD/np126/.kit_complete ] \
   && [ -f $KD/kit_env.sh ]; then
  echo "== [$(el)s] kit already installed in $KD (warm machine)"
elif [ -d .gpu/kit ]; then
  echo "== [$(el)s] install_kit"
  bash benchmarks/gpu/install_kit.sh || { echo "install_kit FAILED"; return 1; }
else
  echo "== no kit: $KD/site etc. are missing and .gpu/kit was not carried (a fresh machine? the second call must"
  echo "   come within 30 s of the first, or carry .gpu/kit as well)"; return 1
fi
# shellcheck disable=SC1091
source $KD/kit_env.sh
# what vllm's api_server needs beyond the kit (benchmarks/gpu/bench_wheels.sh): uvicorn, watchfiles, ...
if [ -d .gpu/bench_whl ] && [ ! -f /tmp/bench_site/.complete ]; then
  $VPY -m pip install -q --no-index --no-deps --no-compile --target /tmp/bench_site .gpu/bench_whl/*.whl \
    && touch /tmp/bench_site/.complete && echo "== [$(el)s] bench wheels -> /tmp/bench_site" \
    || echo "== bench wheels did not install: the vllm serve system will fail"
fi
# clients (tritonclient) need the kit's protobuf 6 in site/client_extra; run_gpu_benchmark.py leaves client_extra
# off the vllm api_server's path (the kit keeps it off the engine's)
export PYTHONPATH=${KIT_CLIENT_PATH:-$KIT_SITE}:/tmp/bench_site:$ROOT
# The Triton stub ignores PYTHONPATH (start_triton_gpu.sh): the model.py files import `python_backends` from this
# checkout, so its root goes on the stub's sys.path through a .pth file of the stub's environment.
STUB_SP=${KIT_STUBENV:-$KD/stubenv}/lib/python3.12/site-packages
if [ -d "$STUB_SP" ]; then
  echo "$ROOT" > "$STUB_SP/zz_repo.pth"
  (cd / && env -u PYTHONPATH "${KIT_STUBENV:-$KD/stubenv}/bin/python3" -c 'import python_backends, sys; print("== stub python:", sys.version.split()[0], python_backends.__file__)') \
    || echo "== python_backends not importable by the stub's python"
fi

BENCH_STEPS=$(echo "$STEPS" | tr ',' '\n' | grep -vx check | paste -sd, -)
rc=0
if echo "$STEPS" | tr ',' '\n' | grep -qx check; then  # first: the second call exists for it
  if [ -d .gpu/minilm ] || [ -d /tmp/minilm-stash ]; then
    echo "== [$(el)s] GPU vs CPU check (embedded all-MiniLM-L6-v2, float16)"
    $VPY tests/gpu/check_gpu_vs_cpu.py --out "$OUT/check_gpu_vs_cpu.json" --work /tmp/gpu_check || rc=$?
  elif [ "$EXPLICIT_CHECK" = 1 ]; then
    echo "== check skipped: .gpu/minilm was not carried"; rc=1
  fi
fi
if [ -n "$BENCH_STEPS" ]; then
  left=$(( DEADLINE - $(el) - 10 ))
  echo "== [$(el)s] benchmark: $BENCH_STEPS (deadline ${left}s)"
  # shellcheck disable=SC2086
  $VPY benchmarks/run_gpu_benchmark.py --out "$OUT" --work /tmp/bench --systems "$BENCH_STEPS" \
    --deadline "$left" --vllm-python "$VPY" ${BENCH_ARGS:-} || rc=$?
fi
echo "== [$(el)s] done rc=$rc"
return $rc
}

main 2>&1 | tee -a "$OUT/run.log"
exit "${PIPESTATUS[0]}"
