#!/usr/bin/env bash
# Wheels that `python3 -m vllm.entrypoints.openai.api_server` (vLLM 0.26) imports and that neither the GPU image
# nor the carry kit (make_kit.sh: enough for vllm.LLM) has. Found by importing vLLM 0.26's api_server, its routers
# and its argument parser with candidate packages hidden (the rest of the server's start is the LLM path the kit
# already runs): uvicorn, watchfiles, model-hosting-container-standards (+ jmespath), prometheus-fastapi-instrumentator.
# Their own needs (click, h11, anyio, httpx, fastapi, starlette, pydantic, prometheus_client) are in the image or kit.
#
# Runs HERE; output .gpu/bench_whl/ (~0.6 MB, ignored through /.gpu/), carried next to .gpu/kit in the benchmark's
# device call; benchmarks/gpu/run_benchmark.sh installs it to /tmp/bench_site.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=$ROOT/.gpu/bench_whl
mkdir -p "$OUTDIR"
PLATS=""
for n in 17 24 27 28 31 34 35; do PLATS="$PLATS --platform manylinux_2_${n}_x86_64"; done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLATS \
  --platform manylinux2014_x86_64 -d "$OUTDIR" \
  uvicorn==0.55.0 watchfiles==1.3.0 model-hosting-container-standards==0.1.16 jmespath==1.1.0 \
  prometheus-fastapi-instrumentator==8.1.0
ls -la "$OUTDIR"
