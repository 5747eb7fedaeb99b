#!/usr/bin/env bash
# Triton perf_analyzer over the reference concurrency levels, with the shipped input data
# (64 documents of ~500 words, top_n=10; loadtest/perf_analyzer/reranker_input.json).
#
#   loadtest/perf_analyzer/run_perf_analyzer.sh OUTDIR [extra perf_analyzer args...]
#
# Environment: PROTOCOL (grpc | http), TRITON_URL (localhost:8001 for grpc, localhost:8000
# for http), RERANK_MODEL (reranker), CONCURRENCY ("1 8 32 64"), MEASUREMENT_INTERVAL_MS (10000),
# MAX_TRIALS (5), STABILITY_PCT (20), INPUT_DATA (the shipped file), PERF_ANALYZER (perf_analyzer).
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
model=${RERANK_MODEL:-reranker}
input=${INPUT_DATA:-$here/reranker_input.json}
mkdir -p "$out"
summary="$out/perf_summary.csv"
rm -f "$summary"

failed=0
for c in ${CONCURRENCY:-1 8 32 64}; do
  echo "== concurrency $c" >&2
  if "$pa" -m "$model" -u "$url" -i "$protocol" \
      --input-data "$input" -b 1 \
      --concurrency-range "$c:$c" \
      --measurement-interval "${MEASUREMENT_INTERVAL_MS:-10000}" \
      --max-trials "${MAX_TRIALS:-5}" --stability-percentage "${STABILITY_PCT:-20}" \
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
