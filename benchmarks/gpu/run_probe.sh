#!/usr/bin/env bash
# The one device call of the GPU bring-up (carry: [".gpu/kit"]):
#   1 install the kit            2 stub round trip, numpy 1.26 (expect PASS)
#   3 same, image numpy 2.x (control, expect garbling)   4 vLLM pooling probe, direct
#   5 vLLM inside a Triton Python stub (if time is left)
# Logs under $OUT (<= 8 files); a SUMMARY block is printed last.
# Budget: vLLM's LLM() took > 100 s on the H200 (2026-12-02: 50 s of it resolving the model
# architecture); give the call timeout_s=600 for all stages, or set PROBE_SKIP/PROBE_T/VIT_BEFORE.
set -uo pipefail
OUT=${OUT:-/tmp/probe_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
G=benchmarks/gpu
SUM=()
say() { echo "== [$(el)s] $*" | tee -a "$OUT/probe.log"; }
VPY=/opt/torch/.venv/bin/python3
stop() {  # stop PID: SIGTERM, then SIGKILL after 20 s
  kill "$1" 2>/dev/null; timeout 20 tail --pid="$1" -f /dev/null || kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null
}

say "env"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader
  uname -r; ls -la /usr/bin/python3* 2>&1 | head -5; readlink -f $VPY; cat /opt/torch/.venv/pyvenv.cfg
  ls -la /usr/lib/x86_64-linux-gnu/libpython3.12* 2>&1; ldconfig -p | grep -c libpython3.12 || true
  which gcc cc nvcc 2>&1; df -h /tmp | tail -1; nproc; free -g | head -2
  $VPY -m pip list 2>/dev/null | grep -iE '^(numpy|torch|transformers|tokenizers|grpcio|protobuf|typing.extensions|anyio|idna|packaging|urllib3|ml.dtypes|triton|scipy|numba|opencv|pillow|aiohttp|huggingface) '
} > "$OUT/env.txt" 2>&1

say "install_kit"
t=$(date +%s)
if bash $G/install_kit.sh >> "$OUT/probe.log" 2>&1; then SUM+=("install_kit: ok in $(( $(date +%s) - t ))s"); else SUM+=("install_kit: FAILED"); fi
source /tmp/kit_env.sh
{ PYTHONPATH=$KIT_CLIENT_PATH $VPY -c "import tritonclient.grpc, google.protobuf, grpc; print('client ok: grpcio', grpc.__version__, 'protobuf', google.protobuf.__version__, google.protobuf.__file__)" 2>&1 | tail -1
  /tmp/stubenv/bin/python3 -c "import sys, numpy, locale; print('stubenv:', sys.version.split()[0], numpy.__version__, locale.getpreferredencoding(False), sys.path)"
} 2>&1 | tee -a "$OUT/env.txt" | cut -c1-300

roundtrip() {  # roundtrip NAME STUBENV
  say "stub round trip $1 (KIT_STUBENV=$2)"
  KIT_STUBENV=$2 bash $G/start_triton_gpu.sh $G/stub_roundtrip/model_repository --exit-timeout-secs 5 \
     > "$OUT/triton_$1.log" 2>&1 &
  local pid=$!
  PYTHONPATH=$KIT_CLIENT_PATH timeout 90 $VPY $G/stub_roundtrip/check_roundtrip.py --timeout 60 --dlpack \
     --protocols grpc,httpraw > /tmp/rt_$1.txt 2>&1
  local rc=$?
  stop $pid
  { echo "### $1 rc=$rc"; cat /tmp/rt_$1.txt; } >> "$OUT/roundtrip.txt"
  SUM+=("roundtrip $1: $(grep -o 'ROUNDTRIP_RESULT.*' /tmp/rt_$1.txt || echo "no result rc=$rc")")
  grep ROUNDTRIP /tmp/rt_$1.txt | cut -c1-400
}
# PROBE_SKIP="np126 np2" skips the round trips (both were seen on the H200, call 1 of 2026-12-02)
[[ " ${PROBE_SKIP:-} " == *" np126 "* ]] || roundtrip np126 /tmp/stubenv
[[ " ${PROBE_SKIP:-} " == *" np2 "* ]] || roundtrip np2 /tmp/stubenv_np2
[ -f "$OUT/triton_np2.log" ] && grep -m3 -E "unpack_from|shape does not match|terminate|Error" "$OUT/triton_np2.log" | cut -c1-300 | tee -a "$OUT/probe.log"

say "vLLM probe under the stub's python (numpy 1.26)"
PY=/tmp/stubenv/bin/python3
PYTHONUNBUFFERED=1 timeout ${PROBE_T:-240} $PY $G/probe_vllm.py --workdir /tmp/probe --out "$OUT/probe_vllm.json" \
   --ids-out /tmp/probe/ids.json > /tmp/probe_vllm.log 2>&1
rc=$?
if [ $rc -ne 0 ] && ! grep -q "PROBE engine up" /tmp/probe_vllm.log; then
  say "no engine with numpy 1.26 (rc=$rc); retry with the image's numpy and PYTHONPATH=/tmp/site"
  { echo "----- first probe log (numpy 1.26), tail"; grep -v "^INFO\|^(EngineCore" /tmp/probe_vllm.log | tail -n 60; } >> "$OUT/probe.log"
  grep -v "^INFO" /tmp/probe_vllm.log | grep -B2 -A12 Traceback | tail -n 30 | cut -c1-300
  PY=$VPY
  PYTHONPATH=$KIT_SITE PYTHONUNBUFFERED=1 timeout ${PROBE_T:-240} $PY $G/probe_vllm.py --workdir /tmp/probe \
     --out "$OUT/probe_vllm.json" --ids-out /tmp/probe/ids.json > /tmp/probe_vllm.log 2>&1
  rc=$?
elif [ $rc -ne 0 ] && [ "$(el)" -lt 120 ]; then
  say "probe failed after import (rc=$rc); retry with PROBE_ATTN=TRITON_ATTN"
  { echo "----- first probe log (default attention), tail"; tail -n 60 /tmp/probe_vllm.log; } >> "$OUT/probe.log"
  PROBE_ATTN=TRITON_ATTN PYTHONUNBUFFERED=1 timeout 100 $PY $G/probe_vllm.py --workdir /tmp/probe \
     --out "$OUT/probe_vllm.json" --ids-out /tmp/probe/ids.json > /tmp/probe_vllm.log 2>&1
  rc=$?
fi
cp /tmp/probe_vllm.log "$OUT/probe_vllm.log"
grep -E "PROBE|Error|error|backend" /tmp/probe_vllm.log | grep -v "PROBE result" | tail -n 10 | cut -c1-600
SUM+=("vllm probe ($PY): rc=$rc $(grep -o 'PROBE result.*' /tmp/probe_vllm.log | cut -c1-100)")

if [ $rc -eq 0 ] && [ "$(el)" -lt ${VIT_BEFORE:-400} ]; then
  SE=/tmp/stubenv; [ "$PY" = /tmp/stubenv/bin/python3 ] || SE=/tmp/stubenv_np2   # numpy 2: DLPack I/O
  say "vLLM inside a Triton Python stub (KIT_STUBENV=$SE)"
  KIT_STUBENV=$SE bash $G/start_triton_gpu.sh $G/stub_roundtrip/vllm_repository --exit-timeout-secs 10 \
     > "$OUT/triton_vllm.log" 2>&1 &
  pid=$!
  PYTHONPATH=$KIT_CLIENT_PATH timeout 200 $VPY $G/stub_roundtrip/check_vllm_in_triton.py /tmp/probe/ids.json 190 > /tmp/vit.txt 2>&1
  rc2=$?
  stop $pid
  cat /tmp/vit.txt | cut -c1-600
  SUM+=("vllm in triton: rc=$rc2 $(grep -o 'VLLM_IN_TRITON.*' /tmp/vit.txt | cut -c1-300)")
else
  SUM+=("vllm in triton: skipped (probe rc=$rc, elapsed $(el)s, python $PY)")
fi

echo; echo "===== SUMMARY ($(el)s) ====="
for s in "${SUM[@]}"; do echo "$s"; done
python3 - "$OUT/probe_vllm.json" <<'EOF' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("numpy", "torch", "vllm", "import_s", "engine_start_s", "score", "classify_raw_from_token_ids",
          "max_abs(sigmoid(raw_tok) - score)", "max_abs(vllm_bf16 - hf_fp32)", "tokens_prompt_with_token_type_ids",
          "classify_64_s", "classify_256_s", "classify_256_tokens_per_s", "hf_error"):
    if k in r: print(f"{k}: {r[k]}")
EOF
