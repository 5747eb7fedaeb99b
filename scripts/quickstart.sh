#!/usr/bin/env bash
# Set up .venv for serving (scripts/setup.sh), start tritonserver in the background with the embedded default model,
# wait until it is ready, answer one rerank request over gRPC, and leave the server running.
# Each step prints the seconds since the start. When the server exits, or is not ready within START_TIMEOUT_S (then
# start_server.sh stops it), the script prints its log's error lines and end and exits 1.
# Environment: HTTP_PORT/GRPC_PORT/METRICS_PORT (8000/8001/8002), MODEL_REPOSITORY, VENV (as scripts/start_server.sh),
# START_TIMEOUT_S (300), RUN_DIR (build: server.log, and the pid file start_server.sh writes for stop_server.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/process_identity.sh
. "$ROOT/scripts/process_identity.sh"
export VENV="${VENV:-$ROOT/.venv}"
RUN_DIR="${RUN_DIR:-$ROOT/build}"
LOG="$RUN_DIR/server.log"
PID_FILE="$RUN_DIR/server-${HTTP_PORT:-8000}.pid"
HTTP="localhost:${HTTP_PORT:-8000}"
GRPC="localhost:${GRPC_PORT:-8001}"
TIMEOUT_S="${START_TIMEOUT_S:-300}"
START=$SECONDS
step() { echo "[quickstart $(printf '%3d' $((SECONDS - START))) s] $*"; }
ready() { curl -sf "$HTTP/v2/health/ready" >/dev/null 2>&1; }
stop_cmd() {  # the command that stops it, with RUN_DIR when it is not the default
  if [ "$RUN_DIR" = "$ROOT/build" ]; then echo "scripts/stop_server.sh"; else echo "RUN_DIR=$RUN_DIR scripts/stop_server.sh"; fi
}
give_up() {  # the server did not come up: say why, show its errors and the end of its log, leave nothing running
  step "FAILED: $1"
  echo "---- error lines of $LOG (the two CUDA ones are expected without a GPU: README) ----"
  grep -E "^E[0-9]{4} |^error: " "$LOG" || true
  echo "---- last 40 lines of $LOG ----"
  tail -n 40 "$LOG"
  echo "----"
  RUN_DIR="$RUN_DIR" HTTP_PORT="${HTTP_PORT:-8000}" "$ROOT/scripts/stop_server.sh" >/dev/null
  exit 1
}

step "setting up $VENV (scripts/setup.sh)"
"$ROOT/scripts/setup.sh"
mkdir -p "$RUN_DIR"
if ready; then
  step "a server already answers on $HTTP: using it"
else
  step "starting tritonserver (HTTP $HTTP, gRPC $GRPC, log ${LOG#"$ROOT"/})"
  # it writes its pid file there, and stops the server when it is not ready in time
  RUN_DIR="$RUN_DIR" START_TIMEOUT_S="$TIMEOUT_S" "$ROOT/scripts/start_server.sh" > "$LOG" 2>&1 < /dev/null &
  pid=$!
  step "  pid $pid; waiting until it is ready (loads rerank_preprocess, rerank_engine with vLLM, rerank_calibrate; up to ${TIMEOUT_S} s)"
  shown=0
  show_loaded() {  # a line per model the log reports loaded since the last call
    mapfile -t loaded < <(grep -o "successfully loaded '[a-z_]*'" "$LOG" || true)
    while [ "$shown" -lt "${#loaded[@]}" ]; do step "  ${loaded[$shown]}"; shown=$((shown + 1)); done
  }
  until ready; do
    kill -0 "$pid" 2>/dev/null || give_up "tritonserver exited before it was ready"
    show_loaded
    [ $(((SECONDS - START) % 15)) -ne 0 ] || step "  loading ..."  # a sign of life while vLLM starts
    sleep 1
  done
  show_loaded
  step "tritonserver is ready"
fi

step "one rerank request over gRPC (examples/rerank_grpc.py)"
"$VENV/bin/python" "$ROOT/examples/rerank_grpc.py" "$GRPC"
step "done. The server keeps running:"
echo "  HTTP     http://$HTTP   (KServe v2: /v2/health/ready, /v2/models/reranker/infer)"
echo "  gRPC     $GRPC"
echo "  metrics  http://localhost:${METRICS_PORT:-8002}/metrics"
if [ -f "$PID_FILE" ] && [ "$(start_time "$(cut -d' ' -f1 "$PID_FILE")")" = "$(cut -d' ' -f2 "$PID_FILE")" ]; then
  echo "  log      ${LOG#"$ROOT"/}"
  echo "  stop     $(stop_cmd)"
else
  echo "  log, stop: not started from $RUN_DIR; those of whatever started it"
fi
