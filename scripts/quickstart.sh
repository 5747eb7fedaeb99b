#!/usr/bin/env bash
# Set up .venv for serving (scripts/setup.sh), start tritonserver in the background with the embedded default model,
# wait until it is ready, answer one rerank request over gRPC, and leave the server running.
# Each step prints the seconds since the start. When the server exits or is not ready within START_TIMEOUT_S, the
# script stops it, prints the end of its log and exits 1.
# Environment: HTTP_PORT/GRPC_PORT/METRICS_PORT (8000/8001/8002), MODEL_REPOSITORY, VENV (as scripts/start_server.sh),
# START_TIMEOUT_S (300), RUN_DIR (build: server.log and server.pid, read by scripts/stop_server.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export VENV="${VENV:-$ROOT/.venv}"
RUN_DIR="${RUN_DIR:-$ROOT/build}"
LOG="$RUN_DIR/server.log"
PID_FILE="$RUN_DIR/server.pid"
HTTP="localhost:${HTTP_PORT:-8000}"
GRPC="localhost:${GRPC_PORT:-8001}"
TIMEOUT_S="${START_TIMEOUT_S:-300}"
START=$SECONDS
step() { echo "[quickstart $(printf '%3d' $((SECONDS - START))) s] $*"; }
ready() { curl -sf "$HTTP/v2/health/ready" >/dev/null 2>&1; }
stop_cmd() { echo "${RUN_DIR:+RUN_DIR=$RUN_DIR }$ROOT/scripts/stop_server.sh"; }
give_up() {  # the server did not come up: say why, show its log, leave nothing running
  step "FAILED: $1"
  echo "---- last 40 lines of $LOG ----"
  tail -n 40 "$LOG"
  echo "----"
  RUN_DIR="$RUN_DIR" "$ROOT/scripts/stop_server.sh" >/dev/null
  exit 1
}

step "setting up $VENV (scripts/setup.sh)"
"$ROOT/scripts/setup.sh"
mkdir -p "$RUN_DIR"
if ready; then
  step "a server already answers on $HTTP: using it"
else
  step "starting tritonserver (HTTP $HTTP, gRPC $GRPC, log $LOG)"
  setsid "$ROOT/scripts/start_server.sh" > "$LOG" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$PID_FILE"
  step "waiting until it is ready (loads rerank_preprocess, rerank_engine with vLLM, rerank_calibrate; up to ${TIMEOUT_S} s)"
  deadline=$((SECONDS + TIMEOUT_S))
  shown=0
  until ready; do
    kill -0 "$pid" 2>/dev/null || give_up "tritonserver exited before it was ready"
    [ "$SECONDS" -lt "$deadline" ] || give_up "tritonserver not ready after ${TIMEOUT_S} s (START_TIMEOUT_S)"
    # a line per model as the log reports it loaded, and one every 15 s while vLLM starts
    mapfile -t loaded < <(grep -o "successfully loaded '[a-z_]*'" "$LOG" || true)
    while [ "$shown" -lt "${#loaded[@]}" ]; do step "  ${loaded[$shown]}"; shown=$((shown + 1)); done
    [ $(((SECONDS - START) % 15)) -ne 0 ] || step "  loading ..."
    sleep 1
  done
  step "tritonserver is ready"
fi

step "one rerank request over gRPC (examples/rerank_grpc.py)"
"$VENV/bin/python" "$ROOT/examples/rerank_grpc.py" "$GRPC"
cat <<EOF
[quickstart $(printf '%3d' $((SECONDS - START))) s] done. The server keeps running:
  HTTP     http://$HTTP   (KServe v2: /v2/health/ready, /v2/models/reranker/infer)
  gRPC     $GRPC
  metrics  http://localhost:${METRICS_PORT:-8002}/metrics
  log      $LOG
  stop     $(stop_cmd)
EOF
