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
