# Sourced by start_server.sh and stop_server.sh. The Python backend's shared-memory regions of one server are named
# its prefix + a UUID (--backend-config=python,shm-region-prefix-name): the HTTP port tells the servers of one host
# apart. Triton removes a region when it unloads the model instance; a server that ends with requests still in
# flight (an engine stub killed under traffic) or is killed leaves them behind, in memory: on Kubernetes in the pod's
# memory-backed /dev/shm, which outlives a container restart.
shm_prefix() {  # shm_prefix HTTP_PORT
  echo "triton_reranker_$1_"
}
remove_unmapped_regions() {  # remove_unmapped_regions HTTP_PORT: the region files of that port's server no process maps
  local file
  for file in /dev/shm/"$(shm_prefix "$1")"*; do
    [ -e "$file" ] || continue
    grep -qsF "$file" /proc/[0-9]*/maps || rm -f "$file"
  done
}
remove_semaphores_of() {  # remove_semaphores_of PID...: the named semaphores those ended processes made that no
  # process has open. joblib's loky names every multiprocessing lock of a process that imported it after that process
  # (`sem.loky-<pid>-<random>`; vLLM's engine core makes two), and a process killed by SIGKILL cannot unlink its own;
  # the standard library's `sem.mp-<random>` cannot be told from another program's, and stays. An open semaphore is
  # mapped under the temporary name glibc made it by, so it is found by its inode, not its name.
  local pid file device
  for pid in "$@"; do
    for file in /dev/shm/sem.loky-"$pid"-*; do
      [ -e "$file" ] || continue
      device=$((16#$(stat -c %D "$file")))
      device=$(printf '%02x:%02x' $((device >> 8)) $((device & 255)))
      grep -qsE "^[^ ]+ [^ ]+ [^ ]+ $device $(stat -c %i "$file") " /proc/[0-9]*/maps || rm -f "$file"
    done
  done
}
