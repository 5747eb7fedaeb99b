#!/usr/bin/env bash
# Stop the servers scripts/start_server.sh started (scripts/quickstart.sh starts it too): SIGTERM to each server and
# its Python stubs (Triton finishes in-flight requests, then unloads the models; the engine step, told by its stub's
# SIGTERM, refuses what has not reached vLLM and gives what has its drain: python_backends/engine/stopping.py), not to
# vLLM's processes, which would abort the requests they hold (the steps end them when they unload); wait up to GRACE_S
# for the server's process group to end, then SIGKILL what is left of it; then remove the shared-memory regions it
# left (scripts/shm_regions.sh).
# A group is signalled only while its leader, the server, still runs: RUN_DIR/server-<HTTP port>.pid holds its pid and
# start time, and a pid whose process has ended may have been given to another program since. While any process of
# the group lives, the kernel gives its number to no new process, so what is left of it once the leader has ended is
# still the server's.
# Environment: RUN_DIR (build), where start_server.sh wrote its pid files; HTTP_PORT: stop only the server of that
# port; GRACE_S (60).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/process_identity.sh
. "$ROOT/scripts/process_identity.sh"
# shellcheck source=scripts/shm_regions.sh
. "$ROOT/scripts/shm_regions.sh"
RUN_DIR="${RUN_DIR:-$ROOT/build}"
GRACE_S="${GRACE_S:-60}"

since() {  # since EPOCHREALTIME -> the seconds since then, to a tenth
  awk -v start="$1" -v now="$EPOCHREALTIME" 'BEGIN { printf "%.1f", now - start }'
}

stop_one() {  # stop_one PID_FILE
  local pid started
  read -r pid started < "$1"
  if [ -z "${started:-}" ] || [ "$(start_time "$pid")" != "$started" ] || ! kill -TERM "$pid" 2>/dev/null; then
    echo "stop_server: tritonserver (pid $pid) was not running"
    # Its stubs may outlive it in its group; once its number runs another program, that group had ended
    if start_time "$pid" >/dev/null; then stopped "$1"; else stopped "$1" "$pid"; fi
    return
  fi
  # shellcheck disable=SC2046
  kill -TERM $(python_stubs "$pid") 2>/dev/null  # the group is still the server's: its leader was running just now
  echo "stop_server: stopping tritonserver (pid $pid) ..."
  local begin=$SECONDS start=$EPOCHREALTIME members
  members=$(group_members "$pid")  # while they run: whose semaphores to look for once they have ended
  while [ $((SECONDS - begin)) -lt "$GRACE_S" ]; do
    if [ -z "$(group_members "$pid")" ]; then
      stopped "$1" "$pid"
      echo "stop_server: stopped in $(since "$start") s"
      return
    fi
    sleep 0.2
  done
  # shellcheck disable=SC2046
  kill -KILL $(group_members "$pid") 2>/dev/null
  stopped "$1" "$pid"
  # shellcheck disable=SC2086
  remove_semaphores_of $members  # a process killed cannot unlink its own
  # nor could the engines' guards, killed with the group, remove their engines' socket directories
  # (python_backends/engine/ipc_dir.py: its SUFFIX, which tests/unit/test_ipc_dir.py holds this line to)
  local port="${1##*/server-}"
  rm -rf "${TMPDIR:-/tmp}/$(shm_prefix "${port%.pid}")vllm-ipc-"*
  echo "stop_server: not stopped after $GRACE_S s; killed"
}

stopped() {  # stopped PID_FILE [PID]: the server is gone; once its group (PID) has ended (its stubs end after it,
  # within seconds), what it left in /dev/shm goes too
  local port="${1##*/server-}" begin=$SECONDS
  while [ -n "${2:-}" ] && [ -n "$(group_members "$2")" ] && [ $((SECONDS - begin)) -lt 10 ]; do sleep 0.2; done
  remove_unmapped_regions "${port%.pid}"
  rm -f "$1"
}

shopt -s nullglob
pattern="server-${HTTP_PORT:-*}.pid"
# shellcheck disable=SC2206
files=("$RUN_DIR"/$pattern)  # unquoted: the * of "every port" is a glob
if [ ${#files[@]} -eq 0 ]; then
  echo "stop_server: no $RUN_DIR/$pattern, so no server started by scripts/start_server.sh to stop"
  exit 0
fi
for file in "${files[@]}"; do
  stop_one "$file"
done
