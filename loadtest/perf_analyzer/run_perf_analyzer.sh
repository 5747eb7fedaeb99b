#!/usr/bin/env bash
# Triton perf_analyzer over a list of concurrency levels, one CSV per level and a summary.
#
#   loadtest/perf_analyzer/run_perf_analyzer.sh OUTDIR [extra perf_analyzer args...]
#   PRESET=cpu loadtest/perf_analyzer/run_perf_analyzer.sh OUTDIR
#
# PRESET=gpu (the default): the reference load shape (loadtest/perf_analyzer/reranker_input.json: 64 documents of
# ~500 words, top_n=10) at concurrency 1 8 32 64, 10 s time windows, stable within 20 %.
# PRESET=cpu: sized for the CPU server on two cores, where one reference-shape request takes seconds and a time
# window holds too few of them to be stable: reranker_input_cpu.json (8 documents of 50 words, top_n=3) at
# concurrency 1 2, windows of 20 requests (count_windows), stable within 50 %, at most 10 windows per level.
#
# Environment (each overrides its preset): PROTOCOL (grpc | http), TRITON_URL (localhost:8001 for grpc,
# localhost:8000 for http), RERANK_MODEL (reranker), CONCURRENCY, MEASUREMENT_INTERVAL_MS (time windows),
# MEASUREMENT_REQUEST_COUNT (count windows; wins over MEASUREMENT_INTERVAL_MS), MAX_TRIALS, STABILITY_PCT, INPUT_DATA,
# PERF_ANALYZER (perf_analyzer).
# Output: OUTDIR/perf_c<C>.csv and perf_c<C>.log per level, OUTDIR/perf_summary.csv (all levels).
#
# perf_analyzer comes from PyPI's tritonclient==2.51.0 wheel (the last line of wheels that
# carried it, same release as the server); deploy/install_tools.sh installs it with the
# libraries it needs. Without it, loadtest/grpc_load.py measures the same levels.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: $0 OUTDIR [perf_analyzer args...]}
shift

pa=${PERF_ANALYZER:-perf_analyzer}
if ! command -v "$pa" >/dev/null 2>&1; then
  echo "perf_analyzer not found ('$pa'): run 'bash deploy/install_tools.sh', or use loadtest/grpc_load.py" >&2
  exit 127
fi

protocol=${PROTOCOL:-grpc}
case "$protocol" in
  grpc) url=${TRITON_URL:-localhost:8001} ;;
  http) url=${TRITON_URL:-localhost:8000} ;;
  *) echo "PROTOCOL must be grpc or http" >&2; exit 2 ;;
esac
case "${PRESET:-gpu}" in
  gpu) input=$here/reranker_input.json levels="1 8 32 64" trials=5 stability=20
       windows=(--measurement-mode time_windows --measurement-interval "${MEASUREMENT_INTERVAL_MS:-10000}") ;;
  cpu) input=$here/reranker_input_cpu.json levels="1 2" trials=10 stability=50
       windows=(--measurement-mode count_windows --measurement-request-count "${MEASUREMENT_REQUEST_COUNT:-20}") ;;
  *) echo "PRESET must be gpu or cpu" >&2; exit 2 ;;
esac
# Either window setting, set, overrides the preset's kind of window: count windows hold the same number of requests
# whatever their latency, so a window at a high concurrency is not cut mid-burst of long requests.
if [ -n "${MEASUREMENT_REQUEST_COUNT:-}" ]; then
  windows=(--measurement-mode count_windows --measurement-request-count "$MEASUREMENT_REQUEST_COUNT")
elif [ -n "${MEASUREMENT_INTERVAL_MS:-}" ]; then
  windows=(--measurement-mode time_windows --measurement-interval "$MEASUREMENT_INTERVAL_MS")
fi
model=${RERANK_MODEL:-reranker}
input=${INPUT_DATA:-$input}
mkdir -p "$out"
summary="$out/perf_summary.csv"
rm -f "$summary"

failed=0
for c in ${CONCURRENCY:-$levels}; do
  echo "== concurrency $c" >&2
  if "$pa" -m "$model" -u "$url" -i "$protocol" \
      --input-data "$input" -b 1 \
      --concurrency-range "$c:$c" \
      "${windows[@]}" \
      --max-trials "${MAX_TRIALS:-$trials}" --stability-percentage "${STABILITY_PCT:-$stability}" \
      -f "$out/perf_c$c.csv" "$@" 2>&1 | tee "$out/perf_c$c.log" >&2 \
     && [ -s "$out/perf_c$c.csv" ]; then
    if [ ! -s "$summary" ]; then head -n 1 "$out/perf_c$c.csv" > "$summary"; fi
    tail -n +2 "$out/perf_c$c.csv" >> "$summary"
  else
    echo "perf_analyzer failed at concurrency $c (see $out/perf_c$c.log)" >&2
    failed=1
  fi
done
[ -s "$summary" ] && cat "$summary"
exit "$failed"
