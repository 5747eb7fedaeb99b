# Sourced by quickstart.sh, start_server.sh and stop_server.sh. A process is named by its pid and its start time
# (clock ticks after boot, /proc/<pid>/stat field 22): the kernel gives a pid to a new process once the old one is
# gone and reaped, so a pid alone may name another program by the time it is read back.
start_time() {  # start_time PID -> the start time, or nothing (status 1) when no such process runs (or a zombie)
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"  # the fields after the command name, which may hold spaces and parentheses
  # shellcheck disable=SC2086
  set -- $stat
  [ "$1" != Z ] || return 1
  echo "${20}"
}
group_members() {  # group_members PGID -> the pids of the live (not zombie) processes of that process group
  ps -e -o pgid=,stat=,pid= | awk -v group="$1" '$1 == group && $2 !~ /^Z/ { print $3 }'
}
python_stubs() {  # python_stubs PGID -> the pids of Triton's Python-backend stubs in that process group
  local pid
  for pid in $(group_members "$1"); do
    case "$(tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | head -1)" in
      *triton_python_backend_stub) echo "$pid" ;;
    esac
  done
}
