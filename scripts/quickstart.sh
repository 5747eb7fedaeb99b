#!/usr/bin/env bash
# Set up (first run ~3 min), start tritonserver in the background with the embedded default model, answer one
# rerank request over gRPC, and leave the server running (its log: build/server.log; stop: scripts/stop_server.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
mkdir -p "$ROOT/build"
if ! curl -sf "localhost:${HTTP_PORT:-8000}/v2/health/ready" >/dev/null 2>&1; then
  setsid "$ROOT/scripts/start_server.sh" > "$ROOT/build/server.log" 2>&1 < /dev/null &
  echo $! > "$ROOT/build/server.pid"
  echo "waiting for tritonserver (pid $(cat "$ROOT/build/server.pid"), log build/server.log) ..."
  for _ in $(seq 1 300); do
    curl -sf "localhost:${HTTP_PORT:-8000}/v2/health/ready" >/dev/null 2>&1 && break
    kill -0 "$(cat "$ROOT/build/server.pid")" 2>/dev/null || { tail -30 "$ROOT/build/server.log"; exit 1; }
    sleep 1
  done
fi
"$ROOT/.venv/bin/python" "$ROOT/examples/rerank_grpc.py" "localhost:${GRPC_PORT:-8001}"
