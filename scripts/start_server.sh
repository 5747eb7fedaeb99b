#!/usr/bin/env bash
# Start the real Triton server bundled in the nvidia-pytriton wheel on the project's model repository.
# Explicit model control with every model loaded at start: a single step (say rerank_calibrate or a crashed
# rerank_engine) can be reloaded through POST /v2/repository/models/<name>/load without a restart.
# Usage: scripts/start_server.sh [extra tritonserver args]   (foreground; env HTTP_PORT/GRPC_PORT/METRICS_PORT,
# MODEL_REPOSITORY, VENV override the defaults)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
SP="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TS="$SP/pytriton/tritonserver"
PYVER="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
BACKENDS="$ROOT/build/backends"
mkdir -p "$BACKENDS/python"
# --remove-destination: a stub of a server still shutting down keeps the old file busy.
cp --remove-destination "$TS/backends/python/libtriton_python.so" "$TS/backends/python/triton_python_backend_utils.py" \
  "$TS/python_backend_stubs/$PYVER/triton_python_backend_stub" "$BACKENDS/python/"
export LD_LIBRARY_PATH="$SP/nvidia_pytriton.libs${EXTRA_LD_LIBRARY_PATH:+:$EXTRA_LD_LIBRARY_PATH}"
# The Python stub ignores PYTHONPATH: its embedded interpreter takes sys.prefix from the first `python3` on PATH
# (pyvenv.cfg), so the venv's bin goes first. `python_backends` is installed into that venv (pip install -e .).
export PATH="$VENV/bin:$PATH"
exec "$TS/bin/tritonserver" \
  --model-repository="${MODEL_REPOSITORY:-$ROOT/model_repository}" \
  --backend-directory="$BACKENDS" \
  --model-control-mode=explicit --load-model='*' \
  --http-port "${HTTP_PORT:-8000}" --grpc-port "${GRPC_PORT:-8001}" --metrics-port "${METRICS_PORT:-8002}" \
  "$@"
