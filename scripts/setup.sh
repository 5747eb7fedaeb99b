#!/usr/bin/env bash
# Create .venv with everything the server and the tests need (idempotent). ~3 min on a fresh 2-core machine.
# The venv must be made from the system Python 3.11 (/usr/bin/python3.11): Triton's Python stub embeds the system
# libpython3.11, and a venv of another 3.11 build breaks its stdlib extension modules (_ssl: undefined symbol).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${STUB_PYTHON:-/usr/bin/python3.11}"
if [ ! -x "$PYTHON" ]; then
  echo "setup: $PYTHON not found; on Debian/Ubuntu: apt-get install -y python3.11 python3.11-venv libpython3.11" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ] || [ "$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')" != "$("$PYTHON" -c 'import sys; print(sys.base_prefix)')" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip==24.3.1 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -m pip install -q --no-deps -r "$ROOT/requirements/server-cpu.lock.txt" 2>&1 | grep -v "^WARNING: Location" || true
# The calibration tool and the deploy/load-test tools, held to the server's versions where they share a package.
"$VENV/bin/python" -m pip install -q -c "$ROOT/requirements/server-cpu.lock.txt" \
  -r "$ROOT/requirements/calibration.txt" -r "$ROOT/requirements/deploy.txt" -r "$ROOT/requirements/gateway-test.txt" 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT" 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import vllm, tritonclient.grpc, python_backends; print(python_backends.__file__); print('setup: ok, vllm', vllm.__version__)"
