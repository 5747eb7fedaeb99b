#!/usr/bin/env bash
# Start the real Triton server bundled in the nvidia-pytriton wheel on the project's model repository.
# Closed by default: HTTP, gRPC and metrics listen on 127.0.0.1 only (BIND_ADDRESS=0.0.0.0 opens them), and the
# control APIs (model-repository, shared-memory, trace, logging) answer only callers that send the header (gRPC:
# metadata) `admin-key: <key>`. The key is TRITON_ADMIN_KEY, or one generated at first start into build/admin-key
# (mode 600), which scripts/recover_engine.py reads. Without the restriction, anyone reaching the HTTP port could
# load a model whose model.py they upload, i.e. run code as this user.
# Explicit model control with every model loaded at start: a single step (say rerank_calibrate or a crashed
# rerank_engine) can be reloaded in place (scripts/recover_engine.py) without a restart.
# Stopping: scripts/stop_server.sh. The server leads a process group of its own (Triton, its Python stubs, vLLM's
# processes), which stop_server.sh signals whole, and writes RUN_DIR/server-<HTTP port>.pid (its pid and start time).
# Usage: scripts/start_server.sh [extra tritonserver args]   (foreground; env HTTP_PORT/GRPC_PORT/METRICS_PORT,
# BIND_ADDRESS, TRITON_ADMIN_KEY, MODEL_REPOSITORY, VENV, RUN_DIR (build) override the defaults;
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turns tracing on)
# START_TIMEOUT_S (unset or 0: no bound): a server not ready within it is stopped and the script ends non-zero, its
# log saying why. Triton's loader waits on a model as long as the model takes (a stub that never ends its start),
# and such a server has been seen to ignore SIGTERM, so what the SIGTERM has not ended in 10 s gets SIGKILL.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Started in the foreground of a terminal the script already leads its job's group; started in the background of a
# script it shares its parent's group, so it makes one (setsid runs in this process, keeping its pid, when it is not
# a group leader).
if [ "$(ps -o pgid= -p $$ | tr -d ' ')" != "$$" ]; then
  exec setsid "$BASH" "$0" "$@"
fi
# shellcheck source=scripts/process_identity.sh
. "$ROOT/scripts/process_identity.sh"
# shellcheck source=scripts/shm_regions.sh
. "$ROOT/scripts/shm_regions.sh"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
SP="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TS="$SP/pytriton/tritonserver"
PYVER="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
BACKENDS="$ROOT/build/backends"
mkdir -p "$BACKENDS/python"
# Each file is copied beside its place and renamed over it: another server starting from the same folder loads the
# backend or execs the stub at any moment, and must find the old file or the new one whole, never a half-written one
# (a running stub keeps its old file either way).
for file in "$TS/backends/python/libtriton_python.so" "$TS/backends/python/triton_python_backend_utils.py" \
  "$TS/python_backend_stubs/$PYVER/triton_python_backend_stub"; do
  target="$BACKENDS/python/$(basename "$file")"
  if ! cmp -s "$file" "$target"; then
    copy="$(mktemp "$target.XXXXXX")"
    cp -p "$file" "$copy" && mv -f "$copy" "$target"
  fi
done
export LD_LIBRARY_PATH="$SP/nvidia_pytriton.libs${EXTRA_LD_LIBRARY_PATH:+:$EXTRA_LD_LIBRARY_PATH}"
# The Python stub ignores PYTHONPATH: its embedded interpreter takes sys.prefix from the first `python3` on PATH
# (pyvenv.cfg), so the venv's bin goes first. `python_backends` is installed into that venv (pip install -e .).
export PATH="$VENV/bin:$PATH"
ADMIN_KEY_FILE="$ROOT/build/admin-key"
if [ -z "${TRITON_ADMIN_KEY:-}" ]; then
  if [ ! -s "$ADMIN_KEY_FILE" ]; then
    # mktemp makes the file mode 600; mv -n keeps the first key when two servers start at once
    KEY_TMP="$(mktemp "$ADMIN_KEY_FILE.XXXXXX")"
    "$PY" -c 'import secrets; print(secrets.token_urlsafe(32))' > "$KEY_TMP"
    mv -n "$KEY_TMP" "$ADMIN_KEY_FILE" && rm -f "$KEY_TMP"
  fi
  TRITON_ADMIN_KEY="$(cat "$ADMIN_KEY_FILE")"
fi
# Without an NVIDIA GPU there are no GPU metrics (NVML, DCGM) and no CUDA pinned-memory pool: leave both off instead
# of logging at every start that they failed. With a GPU the arguments stay Triton's defaults.
NO_GPU_ARGS=()
if ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  NO_GPU_ARGS=(--allow-gpu-metrics=false --pinned-memory-pool-byte-size=0)
fi
ADDRESS="${BIND_ADDRESS:-127.0.0.1}"
# Tracing, OpenTelemetry's own variable: with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (http://collector:4318/v1/traces)
# Triton traces each request that arrives with a W3C traceparent (rate=0: those only, whatever their number) and the
# engine step adds its spans (python_backends/tracing.py), both exported there. Unset: no trace argument at all.
TRACE_ARGS=()
if [ -n "${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}" ]; then
  TRACE_ARGS=(--trace-config mode=opentelemetry --trace-config rate=0 --trace-config count=-1
              --trace-config level=TIMESTAMPS --trace-config "opentelemetry,url=$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
fi
# Latency summaries (nv_inference_request_summary_us{quantile=...}, per model) are the dashboard's percentiles.
# Every config.pbtxt is complete, so Triton need not start each Python model's stub once more only to ask it to
# complete its config (the stub imports the step's packages: seconds per model at every start and reload).
CONTROL_APIS="model-repository,shared-memory,trace,logging:admin-key=$TRITON_ADMIN_KEY"
RUN_DIR="${RUN_DIR:-$ROOT/build}"
mkdir -p "$RUN_DIR"
echo "$$ $(start_time $$)" > "$RUN_DIR/server-${HTTP_PORT:-8000}.pid"  # exec keeps the pid: it names tritonserver
remove_unmapped_regions "${HTTP_PORT:-8000}"  # left by an earlier server of this port that did not unload its models

bound_start() {  # bound_start TIMEOUT_S: run in the server's process group, which keeps the group's number taken
  # while it runs, so the group it signals is the server's; the SIGTERM it sends the group does not end it
  trap '' TERM
  local started deadline=$((SECONDS + $1)) url="http://${ADDRESS/#0.0.0.0/127.0.0.1}:${HTTP_PORT:-8000}/v2/health/ready"
  started="$(start_time $$)"
  until curl -sf -m 2 -o /dev/null "$url"; do
    [ "$(start_time $$)" = "$started" ] || return 0  # the server ended by itself
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "error: tritonserver not ready after $1 s (START_TIMEOUT_S): stopping it" >&2
      kill -TERM -- "-$$"
      for _ in $(seq 50); do [ "$(start_time $$)" = "$started" ] || break; sleep 0.2; done
      # the stubs' regions outlive a killed group; removed from outside it, once nothing maps them
      setsid bash -c ". '$ROOT/scripts/shm_regions.sh'; sleep 2; remove_unmapped_regions '${HTTP_PORT:-8000}'" \
        </dev/null >/dev/null 2>&1 &
      local cleaner=$!  # this shell's unreaped child: the number is its own
      while [ "$(cut -d' ' -f5 "/proc/$cleaner/stat" 2>/dev/null)" = "$$" ]; do sleep 0.05; done  # out of the group
      kill -KILL -- "-$$"  # what is left of the group, this process included
    fi
    sleep 1
  done
}
if [ "${START_TIMEOUT_S:-0}" -gt 0 ]; then
  command -v curl >/dev/null || { echo "start_server: START_TIMEOUT_S needs curl, which is not on PATH" >&2; exit 2; }
  (bound_start "$START_TIMEOUT_S" &)  # not this process's child: tritonserver, which it becomes, would not reap it
fi
exec "$TS/bin/tritonserver" \
  --model-repository="${MODEL_REPOSITORY:-$ROOT/model_repository}" \
  --backend-directory="$BACKENDS" \
  --model-control-mode=explicit --load-model='*' --disable-auto-complete-config \
  --http-restricted-api="$CONTROL_APIS" --grpc-restricted-protocol="$CONTROL_APIS" \
  --http-address "$ADDRESS" --grpc-address "$ADDRESS" --metrics-address "$ADDRESS" \
  --http-port "${HTTP_PORT:-8000}" --grpc-port "${GRPC_PORT:-8001}" --metrics-port "${METRICS_PORT:-8002}" \
  --metrics-config=summary_latencies=true \
  --backend-config=python,shm-region-prefix-name="$(shm_prefix "${HTTP_PORT:-8000}")" \
  "${NO_GPU_ARGS[@]}" "${TRACE_ARGS[@]}" "$@"
