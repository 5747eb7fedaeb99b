#!/usr/bin/env bash
# Set up (idempotent) and run every test: unit, engine (vLLM on CPU), integration (a real tritonserver, HTTP + gRPC)
# and deployment checks. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
# perf_analyzer (from the tritonclient 2.51 wheel) and the docker compose plugin, for tests/deploy.
PYTHON=.venv/bin/python bash deploy/install_tools.sh
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=30 "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$status"
