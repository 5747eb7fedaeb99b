#!/usr/bin/env bash
# Headless locust run against Triton's `reranker` ensemble; writes CSV + HTML under OUTDIR.
#
#   loadtest/run_locust.sh OUTDIR [http|grpc|both] [extra locust args...]
#
# Environment: TRITON_HTTP_URL (http://localhost:8000), TRITON_GRPC_URL (localhost:8001),
# USERS (8), SPAWN_RATE (= USERS), RUN_TIME (10s), RERANK_MODEL (reranker), and the LOAD_*
# knobs of loadtest/locustfile.py. Output: OUTDIR/locust_stats.csv, locust_stats_history.csv,
# locust_failures.csv, locust_exceptions.csv, locust.html, locust.log.
# Exit status is locust's: non-zero when any request failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: $0 OUTDIR [http|grpc|both] [locust args...]}
mode=${2:-http}
shift $(( $# >= 2 ? 2 : 1 ))

case "$mode" in
  http) select=(TritonHttpUser) ;;
  grpc) select=(TritonGrpcUser) ;;
  both) select=(TritonHttpUser TritonGrpcUser) ;;
  *) echo "mode must be http, grpc or both, not '$mode'" >&2; exit 2 ;;
esac

if command -v locust >/dev/null 2>&1; then
  locust_cmd=(locust)
else
  locust_cmd=("${PYTHON:-python3}" -m locust)
fi

users=${USERS:-8}
mkdir -p "$out"
export TRITON_GRPC_URL=${TRITON_GRPC_URL:-localhost:8001}

set -x
"${locust_cmd[@]}" -f "$here/locustfile.py" --headless \
  --host "${TRITON_HTTP_URL:-http://localhost:8000}" \
  -u "$users" -r "${SPAWN_RATE:-$users}" --run-time "${RUN_TIME:-10s}" --stop-timeout 10 \
  --csv "$out/locust" --csv-full-history --html "$out/locust.html" \
  --logfile "$out/locust.log" --only-summary \
  "$@" "${select[@]}"
