#!/usr/bin/env bash
# Start the Triton 2.51.0 server bundled in nvidia-pytriton 0.7.0 on the GPU host, after
# install_kit.sh. Runs in the foreground (exec); put it in the background yourself.
#
# usage: bash tools/offline_gpu/start_triton_gpu.sh MODEL_REPOSITORY [more tritonserver args]
# env:   HTTP_PORT=8000 GRPC_PORT=8001 METRICS_PORT=8002
#        KIT_STUBENV=/tmp/stubenv  the Python environment the models run in (see below)
#
# Why PATH and not PYTHONPATH: the python backend stub embeds Python through pybind11 with an
# isolated configuration, so it ignores PYTHONPATH/PYTHONHOME; its sys.prefix comes from the
# first `python3` on PATH (a venv's pyvenv.cfg there is honoured). On the GPU host that is
# /opt/torch/.venv, whose numpy 2.5.2 the stub (built against numpy 1.x) misreads: BYTES lengths
# of 0x03030303, FP32 shape mismatches. $KIT_STUBENV/bin/python3 is the system python3.12 with
# numpy 1.26.4 first on sys.path, then the kit, then /opt/torch/.venv's packages.
set -euo pipefail
REPO=${1:?usage: start_triton_gpu.sh MODEL_REPOSITORY [tritonserver args]}
shift
PT=${KIT_PYTRITON:-/tmp/pytriton}
TS=$PT/pytriton/tritonserver
STUBENV=${KIT_STUBENV:-/tmp/stubenv}
LIBPY=${KIT_LIBPY:-/tmp/libpython312}
[ -x "$TS/backends/python/triton_python_backend_stub" ] || { echo "run install_kit.sh first" >&2; exit 1; }
export LD_LIBRARY_PATH=$PT/nvidia_pytriton.libs:$LIBPY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$STUBENV/bin:$PATH
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV
export VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-0} HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 LANG=${LANG:-C.UTF-8}
exec "$TS/bin/tritonserver" --model-repository="$REPO" --backend-directory="$TS/backends" \
  --http-port "${HTTP_PORT:-8000}" --grpc-port "${GRPC_PORT:-8001}" --metrics-port "${METRICS_PORT:-8002}" "$@"
