#!/usr/bin/env bash
# Stop the server scripts/quickstart.sh started: SIGTERM to its process group (Triton finishes in-flight requests,
# then unloads the models), wait up to 60 s for the group to end, then SIGKILL what is left of it.
# The group is signalled only while its leader, the server quickstart.sh started, still runs: server.pid holds its
# pid and start time, and a pid whose process has ended may have been given to another program since. While any
# process of the group lives, the kernel gives its number to no new process, so what is left of it once the leader
# has ended is still the server's.
# Environment: RUN_DIR (build), where quickstart.sh wrote server.pid.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/process_identity.sh
. "$ROOT/scripts/process_identity.sh"
PID_FILE="${RUN_DIR:-$ROOT/build}/server.pid"
if [ ! -f "$PID_FILE" ]; then
  echo "stop_server: no $PID_FILE, so no server started by scripts/quickstart.sh to stop"
  exit 0
fi
read -r pid started < "$PID_FILE"
if [ -z "${started:-}" ] || [ "$(start_time "$pid")" != "$started" ] || ! kill -TERM -- "-$pid" 2>/dev/null; then
  echo "stop_server: tritonserver (pid $pid) was not running"
  rm -f "$PID_FILE"
  exit 0
fi
echo "stop_server: stopping tritonserver (pid $pid) ..."
for _ in $(seq 1 60); do
  [ -n "$(group_members "$pid")" ] || { rm -f "$PID_FILE"; echo "stop_server: stopped"; exit 0; }
  sleep 1
done
# shellcheck disable=SC2046
kill -KILL $(group_members "$pid") 2>/dev/null
rm -f "$PID_FILE"
echo "stop_server: not stopped after 60 s; killed"
