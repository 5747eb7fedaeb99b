#!/usr/bin/env bash
# Build the carry kit for the H200 device machine (Python 3.12, torch 2.11.0+cu130, no network).
#
# Runs HERE (the CPU development machine, with PyPI access). Reproducible: every download is
# pinned. Output: .gpu/kit/ (ignored by git through .git/info/exclude), a few .tar.xz parts that
# a device call carries (carry: [".gpu/kit"]) and benchmarks/gpu/install_kit.sh unpacks there:
#
#   site.tar.xz    -> /tmp/site     vllm 0.26.0 (trimmed, device code pruned to sm_90) + 24 small
#                                   wheels it needs that the image lacks + tritonclient (gRPC);
#                                   site/client_extra: protobuf 6.33.6 for clients only
#   np126.tar.xz   -> /tmp/np126    numpy 1.26.4 for the Triton Python stub (see NOTES.md)
#   triton.tar.xz  -> /tmp/pytriton the Triton 2.51.0 server from nvidia-pytriton 0.7.0, slimmed:
#                                   tritonserver, python backend, the 3.12 stub, needed libs only
#
# Usage: bash benchmarks/gpu/make_kit.sh           (from the repo root; ~5 min on 2 cores)
#   FA3_KEEP=64:64,128:128   FlashAttention-3 head sizes kept (head_dim:head_dim_v); others zeroed
#   KIT_SPLIT=60M            split parts larger than this (for carrying across two calls)
#   KIT_PARTS="pytriton"     rebuild only these parts (default: site np126 pytriton)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
HERE=benchmarks/gpu
DL=.whl                       # downloaded wheels (ignored)
KIT=.gpu/kit                  # output (ignored)
WORK=${KIT_WORK:-/tmp/gpukit-build}
FA3_KEEP=${FA3_KEEP:-64:64,128:128}
KIT_SPLIT=${KIT_SPLIT:-}
grep -qx '/.gpu/' .git/info/exclude || echo '/.gpu/' >> .git/info/exclude
grep -qx '/.whl/' .git/info/exclude || echo '/.whl/' >> .git/info/exclude

PLATS=""
for n in 17 24 27 28 31 34 35; do PLATS="$PLATS --platform manylinux_2_${n}_x86_64"; done
PIP_DL="python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLATS --platform manylinux2014_x86_64 --platform manylinux1_x86_64"

# vllm 0.26.0 pins torch==2.11.0 (the image's). Its other needs that the image lacks, pinned to
# versions that agree with each other: xgrammar 0.2.7 is the newest accepting vllm's pin
# apache-tvm-ffi==0.1.10; pydantic 2.14.4 wants pydantic-core 2.50.5 and typing-extensions>=4.16.
VLLM=vllm==0.26.0
DEPS="llguidance==1.7.6 xgrammar==0.2.7 apache-tvm-ffi==0.1.10 openai==3.57.0 jiter==0.19.0
 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 sniffio==1.3.1 openai-harmony==0.0.8
 pyzmq==27.3.0 cbor2==6.3.0 msgspec==0.23.0 fastapi==0.136.3 starlette==1.10.0 pybase64==1.5.1
 py-cpuinfo==9.0.0 cachetools==8.0.2 partial-json-parser==0.2.1.1.post7 pydantic==2.14.4
 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0"
# tritonclient's gRPC client; grpcio, packaging, urllib3, ml-dtypes are in the image. Its generated
# code wants protobuf >= 6.33.5 at run time: protobuf 6.33.6 goes to site/client_extra, which
# only clients put on their path (PYTHONPATH=$KIT_SITE/client_extra:$KIT_SITE).
CLIENT="tritonclient==2.73.0 python-rapidjson==1.25 protobuf==6.33.6"
NUMPY=numpy==1.26.4
PYTRITON=nvidia-pytriton==0.7.0

mkdir -p $DL/dl $DL/deps $DL/client $DL/pytriton
ls $DL/dl/vllm-0.26.0-*.whl >/dev/null 2>&1 || $PIP_DL -d $DL/dl $VLLM
for spec in $DEPS; do
  n=${spec%%==*}; v=${spec##*==}; f=$(echo "$n" | tr - _)
  ls $DL/deps/${f}-${v}-*.whl >/dev/null 2>&1 || $PIP_DL -d $DL/deps "$spec"
done
for spec in $CLIENT $NUMPY; do
  n=${spec%%==*}; v=${spec##*==}; f=$(echo "$n" | tr - _)
  ls $DL/client/${f}-${v}-*.whl >/dev/null 2>&1 || $PIP_DL -d $DL/client "$spec"
done
ls $DL/pytriton/nvidia_pytriton-0.7.0-*.whl >/dev/null 2>&1 || \
  python3 -m pip download -q --no-deps -d $DL/pytriton $PYTRITON
# keep exactly one version of each dependency
if [ "$(ls $DL/deps | sed 's/-[0-9].*//' | sort | uniq -d)" != "" ]; then
  echo "two versions of one wheel in $DL/deps:"; ls $DL/deps | sed 's/-[0-9].*//' | sort | uniq -d; exit 1
fi

PARTS=${KIT_PARTS:-site np126 pytriton}
mkdir -p "$WORK" "$KIT"
for part in $PARTS; do rm -rf "${WORK:?}/$part" "$KIT/$part".tar.xz*; mkdir -p "$WORK/$part"; done

build_site() {
# ---- site: vllm trimmed ----------------------------------------------------------------------
unzip -q "$DL"/dl/vllm-0.26.0-*.whl -d "$WORK/site"
S="$WORK/site/vllm"
# Files a pooling model on an H200 does not load (VLLM.md): FlashAttention 2 (Hopper uses FA3),
# the MoE kernels, the Rust router binary, deep_gemm builds for other Pythons; plus the C++
# headers deep_gemm and the Blackwell FMHA would JIT-compile from.
rm -f  "$S/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$S/_moe_C_stable_libtorch.abi3.so" "$S/vllm-rs"
rm -f  "$S"/third_party/deep_gemm/_C.cpython-3{10,11,13,14}-*.so
rm -rf "$S/third_party/deep_gemm/include" "$S/third_party/fmha_sm100/cutlass/include"
# Device code: keep only what an sm_90 GPU can load; FA3 only the listed head sizes.
python3 $HERE/prune_fatbin.py --arch 90 --fa3-keep "$FA3_KEEP" $(find "$S" -name '*.so')
# the RECORD no longer matches; nothing on the device checks it
echo "vllm 0.26.0 trimmed by benchmarks/gpu/make_kit.sh (sm_90 only; FA3 head sizes $FA3_KEEP)" > "$WORK/site/vllm-0.26.0.dist-info/KIT_TRIMMED"

# ---- site: the small wheels + tritonclient ----------------------------------------------------
python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" \
  --python-version 3.12 --implementation cp --only-binary=:all: $PLATS --platform manylinux2014_x86_64 \
  $DL/deps/*.whl $DL/client/tritonclient-*.whl $DL/client/python_rapidjson-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site/client_extra" \
  --python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux2014_x86_64 \
  $DL/client/protobuf-6.33.6-*.whl
# tritonclient 2.73's generated gRPC code refuses grpcio < 1.81.1 (a version gate, not an API
# need beyond _registered_method, grpcio >= 1.63); lower the gate for older images.
sed -i "s/^GRPC_GENERATED_VERSION = '1.81.1'/GRPC_GENERATED_VERSION = '1.63.0'  # kit: was 1.81.1/" \
  "$WORK/site/tritonclient/grpc/service_pb2_grpc.py"
rm -rf "$WORK/site/bin" "$WORK/site/client_extra/bin"
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

for part in $PARTS; do
  build_$part
  # static symbol tables and debug info: zeroed in place (not loaded; strip would move bytes)
  python3 $HERE/zero_symtab.py "$WORK/$part"
done

# ---- pack -----------------------------------------------------------------------------------
for part in $PARTS; do
  tar -C "$WORK" --owner=0 --group=0 --sort=name -cf - "$part" | xz -9 -T2 > "$KIT/$part.tar.xz"
done
if [ -n "$KIT_SPLIT" ]; then
  for f in "$KIT"/*.tar.xz; do
    if [ "$(stat -c %s "$f")" -gt "$(numfmt --from=iec "$KIT_SPLIT")" ]; then
      split -b "$KIT_SPLIT" -d "$f" "$f.part"; rm "$f"
    fi
  done
fi
(cd "$KIT" && sha256sum *.tar.xz* > SHA256SUMS)
du -sh "$WORK"/site "$WORK"/np126 "$WORK"/pytriton
ls -la "$KIT"; du -ch "$KIT" | tail -1
