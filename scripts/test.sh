#!/usr/bin/env bash
# Set up (idempotent) and run every test: unit, engine (vLLM on CPU), integration (a real tritonserver, HTTP + gRPC)
# and deployment checks. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh --tests   # serving, plus the test and tool packages
# perf_analyzer (from the tritonclient 2.51 wheel) and the docker compose plugin, for tests/deploy.
PYTHON=.venv/bin/python bash deploy/install_tools.sh
# Two passes: everything else on two pytest-xdist workers (the 2-core CI machine waits on servers and engines more
# than it computes; `--dist loadfile` keeps each file on one worker, in order, with its module's server or engine;
# files go out in collection order, the longest first: tests/conftest.py),
# then the `alone` tests (fault injection, timing sensitive) with nothing else running. Exit 5 (nothing collected)
# is fine for one pass, not for both.
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=30 -m "not alone" "$@"
first=$?
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=10 -m alone "$@"
second=$?
set -e
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
for status in "$first" "$second"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
exit 0
