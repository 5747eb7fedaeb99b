#!/usr/bin/env bash
# Unpack the offline kit (made by make_kit.sh) on the GPU host and set up the environments.
# Runs THERE, from the repo root, with ".gpu/kit-<version>" and ".gpu/kit-common" copied beside it (or stashed
# earlier, below). Idempotent; ~20 s.
#
#   /tmp/site      vllm <version> (trimmed) + its small deps + what `vllm serve` needs + tritonclient (gRPC)
#   /tmp/torch     the torch a release pins where it is not the host's (0.27.1: 2.13.0, 0.34.0: 2.14.0), with its
#                  triton and libnccl; nvidia/{cu13,cudnn,cusparselt,nvshmem} link the host's CUDA 13 libraries.
#                  Removed for a release that runs on the host's torch.
#   /tmp/np126     numpy 1.26.4
#   /tmp/pytriton  Triton 2.51.0 server (nvidia-pytriton 0.7.0, slimmed), 3.12 stub in backends/python
#   /tmp/perf      perf_analyzer 2.51.0 + libcudart.so.12 + libb64 (run it as /tmp/perf/run_perf_analyzer)
#   /tmp/stubenv   a venv-shaped folder whose bin/python3 is the system python3.12 and whose
#                  site-packages/zz_kit.pth puts /tmp/np126, /tmp/torch, /tmp/site, then /opt/torch/.venv's
#                  site-packages on sys.path. The Triton Python stub takes its sys.prefix from the
#                  `python3` first on PATH and ignores PYTHONPATH (see NOTES.md), so
#                  start_triton_gpu.sh puts /tmp/stubenv/bin first on PATH. Its
#                  _kit_stub_fix.py sets a UTF-8 LC_CTYPE (the stub leaves the C locale: ASCII).
#   /tmp/libpython312   a symlink to the system libpython3.12.so.1.0 that the stub links
#   /tmp/kit_env.sh     variables for later commands (source it)
#
# Parts that reach the host at different times: after each copy run
#   bash tools/offline_gpu/install_kit.sh --stash     (copies the parts present to /tmp/gpukit/<kit folder>/)
# and, once all are there, run it plainly: it reads /tmp/gpukit too. Kits of several versions can be stashed side
# by side; VLLM_VERSION picks the one installed.
# VLLM_VERSION (default 0.26.0) names the kit folder; a different version than the one installed is re-installed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
V=${VLLM_VERSION:-0.26.0}
KIT_DIRS=${KIT_DIRS:-".gpu/kit-$V .gpu/kit-common /tmp/gpukit/kit-$V /tmp/gpukit/kit-common"}
PARTS=${KIT_INSTALL_PARTS:-site torch np126 pytriton perf}
DEST=${KIT_DEST:-/tmp}
VENV_SITE=${VENV_SITE:-/opt/torch/.venv/lib/python3.12/site-packages}
mkdir -p "$DEST"

if [ "${1:-}" = "--stash" ]; then
  for d in .gpu/kit-*/; do
    k=$(basename "$d"); mkdir -p "/tmp/gpukit/$k"
    for f in "$d"*.tar.xz*; do if [ -f "$f" ]; then cp "$f" "/tmp/gpukit/$k/"; echo "stashed $k/$(basename "$f")"; fi; done
  done
  du -sh /tmp/gpukit/*; exit 0
fi

parts_of() {  # print the files holding part $1, in order (whole file, or split parts)
  local d f
  for d in $KIT_DIRS; do
    if [ -f "$d/$1.tar.xz" ]; then echo "$d/$1.tar.xz"; return; fi
  done
  for d in $KIT_DIRS; do
    for f in "$d/$1.tar.xz.part"*; do if [ -f "$f" ]; then echo "$(basename "$f") $f"; fi; done
  done | sort -u -k1,1 | cut -d' ' -f2
}
for part in $PARTS; do
  stamp="$DEST/$part/.kit_complete"
  # site and torch are per vLLM version; the other parts are the same for every kit
  if [ -f "$stamp" ] && { [ "$part" != site ] && [ "$part" != torch ] || [ "$(cat "$stamp")" = "$V" ]; }; then
    echo "install_kit: $DEST/$part already there"; continue
  fi
  files=$(parts_of $part)
  if [ -z "$files" ] && [ "$part" = perf ]; then echo "install_kit: no perf.tar.xz: no perf_analyzer"; continue; fi
  if [ -z "$files" ] && [ "$part" = torch ]; then
    rm -rf "${DEST:?}/torch"; echo "install_kit: no torch.tar.xz: vLLM $V runs on the host's torch"; continue
  fi
  [ -n "$files" ] || { echo "install_kit: no $part.tar.xz[.partNN] in $KIT_DIRS" >&2; exit 1; }
  rm -rf "${DEST:?}/$part"
  # shellcheck disable=SC2086
  cat $files | xz -dc -T0 | tar -x -C "$DEST"
  echo "$V" > "$stamp"
  echo "install_kit: $part <- $(echo $files | tr '\n' ' ')($(du -sh "$DEST/$part" | cut -f1))"
done

# torch's RPATH looks for its CUDA libraries in ../../nvidia/<lib>/lib: link the host's beside the kit's NCCL
if [ -d "$DEST/torch/torch" ]; then
  for lib in cu13 cudnn cusparselt nvshmem; do
    if [ -d "$VENV_SITE/nvidia/$lib" ]; then ln -sfn "$VENV_SITE/nvidia/$lib" "$DEST/torch/nvidia/$lib"; fi
  done
fi

TS=$DEST/pytriton/pytriton/tritonserver
cp -p "$TS/python_backend_stubs/3.12/triton_python_backend_stub" "$TS/backends/python/"
chmod +x "$TS/bin/tritonserver" "$TS/backends/python/triton_python_backend_stub"

# the system Python 3.12 that the stub's libpython belongs to
PY312=${PY312:-/usr/bin/python3.12}
[ -x "$PY312" ] || PY312=$(readlink -f /opt/torch/.venv/bin/python3)
LIBPY=""
for c in "$($PY312 -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))' 2>/dev/null)/libpython3.12.so.1.0" \
         /usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0 /usr/lib/libpython3.12.so.1.0 /usr/local/lib/libpython3.12.so.1.0; do
  if [ -f "$c" ]; then LIBPY=$c; break; fi
done
[ -n "$LIBPY" ] || LIBPY=$(ldconfig -p | awk '/libpython3.12.so.1.0/ {print $NF; exit}')
[ -n "$LIBPY" ] || { echo "install_kit: libpython3.12.so.1.0 not found" >&2; exit 1; }
mkdir -p "$DEST/libpython312" && ln -sf "$LIBPY" "$DEST/libpython312/libpython3.12.so.1.0"

make_stubenv() {  # make_stubenv DIR "PTH LINES"
  local env=$1
  rm -rf "$env"; mkdir -p "$env/bin" "$env/lib/python3.12/site-packages"
  ln -s "$PY312" "$env/bin/python3"; ln -s python3 "$env/bin/python"; ln -s python3 "$env/bin/python3.12"
  printf 'home = %s\ninclude-system-site-packages = false\nversion = %s\n' \
    "$(dirname "$PY312")" "$($PY312 -c 'import platform; print(platform.python_version())')" > "$env/pyvenv.cfg"
  cp "$HERE/stubenv/_kit_stub_fix.py" "$env/lib/python3.12/site-packages/"
  printf 'import _kit_stub_fix\n%b' "$2" > "$env/lib/python3.12/site-packages/zz_kit.pth"
}
# numpy 1.26 first: the nvidia-pytriton 0.7.0 stub garbles tensors under numpy 2 (NOTES.md)
make_stubenv "$DEST/stubenv" "import _kit_stub_fix; _kit_stub_fix.hide(*'${KIT_HIDE:-scipy sklearn}'.split())\n$DEST/np126\n$DEST/torch\nimport site; site.addsitedir('$DEST/site')\nimport site; site.addsitedir('$VENV_SITE')\n"

# A PYTHONPATH entry's .pth files are not read (the stub's env reads /tmp/site's: addsitedir above): the package dir
# that nvidia-cutlass-dsl's .pth adds (`cutlass`, imported by 0.34.0's kernel warm-up) is named on the paths below
PTH_DIRS=""
if [ -d "$DEST/site/nvidia_cutlass_dsl/dsl_packages" ]; then PTH_DIRS=":$DEST/site/nvidia_cutlass_dsl/dsl_packages"; fi
cat > "$DEST/kit_env.sh" <<EOF
export KIT_SITE=$DEST/site KIT_NP126=$DEST/np126 KIT_PYTRITON=$DEST/pytriton KIT_STUBENV=$DEST/stubenv
export KIT_LIBPY=$DEST/libpython312
# python with the host's numpy 2.x + the kit (clients):  PYTHONPATH=\$KIT_CLIENT_PATH /opt/torch/.venv/bin/python3
export KIT_CLIENT_PATH=$DEST/site/client_extra:$DEST/torch:$DEST/site$PTH_DIRS
# python with the host's numpy 2.x + the engine's packages (vLLM, and torch where the kit carries one)
export KIT_ENGINE_PATH=$DEST/torch:$DEST/site$PTH_DIRS
# python exactly as the Triton stub sees it (numpy 1.26): \$KIT_STUBENV/bin/python3
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
EOF
# the torch the engine will import must be the one this vLLM pins (a torch part not yet copied would leave the
# host's): read both from the installed metadata, without importing either
VPY=${VPY:-/opt/torch/.venv/bin/python3}
[ -x "$VPY" ] || VPY=$PY312
PYTHONPATH=$DEST/torch:$DEST/site "$VPY" - <<'PYEOF'
import re
from importlib.metadata import requires, version
pin = next((r for r in requires("vllm") or () if re.match(r"torch\s*==", r)), None)
found = version("torch").split("+")[0]
print(f"install_kit: vllm {version('vllm')} pins {pin}; torch {version('torch')} found")
if pin and pin.split("==")[1].split(";")[0].strip() != found:
    raise SystemExit(f"install_kit: vllm {version('vllm')} needs {pin} but torch {found} comes first: copy the "
                     "kit's torch part (torch.tar.xz) and install again")
PYEOF
echo "install_kit: python=$PY312 libpython=$LIBPY; env in $DEST/kit_env.sh"
