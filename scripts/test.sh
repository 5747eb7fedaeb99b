#!/usr/bin/env bash
# Set up (idempotent) and run every test: unit, engine (vLLM on CPU), integration (a real tritonserver, HTTP + gRPC)
# and deployment checks. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN_START=$SECONDS
scripts/setup.sh --tests   # serving, plus the test and tool packages
# perf_analyzer (from the tritonclient 2.51 wheel) and the docker compose plugin, for tests/deploy.
PYTHON=.venv/bin/python bash deploy/install_tools.sh
SETUP_S=$((SECONDS - RUN_START))
# The tests run two workers, their servers' vLLM engines and the tests' own torch on two cores at once: an OpenMP
# thread that spins at a barrier while its sibling waits for a core takes the core that sibling waits for. Sleeping
# threads cost a small request a little latency on an idle host and save a busy one about a quarter of its CPU time.
export OMP_WAIT_POLICY=PASSIVE
# One tritonserver on the default model repository serves every test that needs nothing else, on both workers: its
# keeper starts it while the first tests run and stops it when this script closes the pipe to its stdin (or dies).
# With pytest arguments (a selection) each worker starts one when a test first needs it.
RUN_DIR="$ROOT/build/test-run"
mkdir -p "$RUN_DIR"
KEEPER_PID=""
if [ "$#" -eq 0 ]; then
  export RERANKER_TEST_SERVER="$RUN_DIR/server.json"
  exec {KEEPER}> >(exec .venv/bin/python -m tests.support.shared_server "$RERANKER_TEST_SERVER")
  KEEPER_PID=$!
fi
# Two passes: everything else on two pytest-xdist workers (the 2-core CI machine waits on servers and engines more
# than it computes; `--dist loadfile` keeps each file on one worker, in order, with its module's server or engine;
# files go out in collection order, the longest first: tests/conftest.py),
# then the `alone` tests (fault injection, timing sensitive) with nothing else running. The alone pass's process
# starts beside the parallel pass and collects once a parallel worker has run out of files; its tests wait at the
# gate until the parallel pass has ended (tests/support/alone_gate.py). Exit 5 (nothing collected) is fine for one
# pass, not for both.
GATE="$RUN_DIR/alone.gate"
rm -f "$GATE"
mkfifo "$GATE"
exec {GATE_FD}<>"$GATE"  # test.sh's own: the passes run without it, so that its end is the FIFO's end
set +e
RERANKER_TEST_WAIT_GATE="$GATE" .venv/bin/python -m pytest -q -p no:cacheprovider --durations=10 \
  --junitxml="$RUN_DIR/alone.xml" -m alone "$@" {GATE_FD}>&- &
ALONE_PID=$!
PASS_START=$SECONDS
RERANKER_TEST_OPEN_GATE="$GATE" .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  --no-loadscope-reorder --durations=30 --junitxml="$RUN_DIR/parallel.xml" -m "not alone" "$@" {GATE_FD}>&-
first=$?
PARALLEL_S=$((SECONDS - PASS_START))
PASS_START=$SECONDS
printf 'collect\nrun\n' >&"$GATE_FD"
wait "$ALONE_PID"
second=$?
exec {GATE_FD}>&-
rm -f "$GATE"
ALONE_S=$((SECONDS - PASS_START))
if [ -n "$KEEPER_PID" ]; then
  exec {KEEPER}>&-
  wait "$KEEPER_PID"
fi
set -e
.venv/bin/python -m tests.support.run_summary --setup-s "$SETUP_S" --parallel-s "$PARALLEL_S" --alone-s "$ALONE_S" \
  --total-s "$((SECONDS - RUN_START))" "$RUN_DIR/parallel.xml" "$RUN_DIR/alone.xml"
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
for status in "$first" "$second"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
exit 0
