#!/usr/bin/env bash
# Stop the server scripts/quickstart.sh started: SIGTERM to its process group (Triton finishes in-flight requests,
# then unloads the models), wait up to 60 s, then SIGKILL what is left of the group.
# Environment: RUN_DIR (build), where quickstart.sh wrote server.pid.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PID_FILE="${RUN_DIR:-$ROOT/build}/server.pid"
if [ ! -f "$PID_FILE" ]; then
  echo "stop_server: no $PID_FILE, so no server started by scripts/quickstart.sh to stop"
  exit 0
fi
pid="$(cat "$PID_FILE")"
if ! kill -TERM -- "-$pid" 2>/dev/null; then
  echo "stop_server: tritonserver (pid $pid) was not running"
  rm -f "$PID_FILE"
  exit 0
fi
echo "stop_server: stopping tritonserver (pid $pid) ..."
for _ in $(seq 1 60); do
  kill -0 -- "-$pid" 2>/dev/null || { rm -f "$PID_FILE"; echo "stop_server: stopped"; exit 0; }
  sleep 1
done
kill -KILL -- "-$pid" 2>/dev/null
rm -f "$PID_FILE"
echo "stop_server: not stopped after 60 s; killed"
