"""The benchmark's step probe moves an engine core onto CPUs of its own (gpu_run.sh's ENGINE_CPUS): every thread of
the process, before its first step, once; and profiles its steps (STEP_PROBE_PROFILE), which step_report prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.step_probe import cpu_list
from benchmarks.step_report import PROFILE_TOP, profile_lines

ROOT = Path(__file__).resolve().parents[2]

# An engine core's step, wrapped as the probe wraps vLLM's, in a process with a second thread started before it
ENGINE_CORE = """
import json, os, sys, threading
from benchmarks import step_probe
started = threading.Event()
threading.Thread(target=lambda: (started.set(), threading.Event().wait(30)), daemon=True).start()
started.wait()
step = step_probe._timed_step(lambda self: None)
step(None)
step(None)
step_probe.flush()
print(json.dumps({task: sorted(os.sched_getaffinity(int(task))) for task in os.listdir("/proc/self/task")}))
"""


def run_core(script: str, tmp_path: Path, **variables: str) -> str:
    """`script` in a process of its own with the probe's variables (those not given unset); its standard output."""
    env = {k: v for k, v in os.environ.items() if k not in ("STEP_PROBE_ENGINE_CPUS", "STEP_PROBE_PROFILE")}
    env.update(variables, STEP_PROBE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(("text", "cpus"), [("14-15", {14, 15}), ("2,5-7", {2, 5, 6, 7}), ("0", {0}), ("", set())])
def test_cpu_lists_read_as_taskset_writes_them(text, cpus):
    assert cpu_list(text) == cpus


def test_an_engine_core_moves_every_thread_onto_its_cpus_before_its_first_step_once(tmp_path):
    first = min(os.sched_getaffinity(0))
    affinities = json.loads(run_core(ENGINE_CORE, tmp_path, STEP_PROBE_ENGINE_CPUS=str(first)))
    assert len(affinities) == 2 and all(cpus == [first] for cpus in affinities.values())
    (records,) = tmp_path.glob("*.jsonl")
    events = [json.loads(line) for line in records.read_text().splitlines()]
    assert [e["cpus"] for e in events if e["ev"] == "pinned"] == [[first]]
    assert [e["ev"] for e in events].count("step") == 2


def test_without_engine_cpus_nothing_moves(tmp_path):
    affinities = json.loads(run_core(ENGINE_CORE, tmp_path))
    assert all(cpus == sorted(os.sched_getaffinity(0)) for cpus in affinities.values())


# An engine core whose step spends its time in one function of its own; vLLM's other step function is wrapped too,
# first, and never runs
PROFILED_CORE = """
from benchmarks import step_probe
def sum_of_squares(n):
    return sum(i * i for i in range(n))
idle_step = step_probe._timed_step(lambda self: None)
step = step_probe._timed_step(lambda self: sum_of_squares(200000))
for _ in range(3):
    step(None)
"""


def test_profiled_steps_are_written_at_exit_and_their_own_time_reported(tmp_path):
    run_core(PROFILED_CORE, tmp_path, STEP_PROBE_PROFILE="1")
    (profile,) = tmp_path.glob("*.prof")
    head, *lines = profile_lines(str(profile))
    assert head.startswith("  profile: ") and 1 < len(lines) <= PROFILE_TOP
    columns = (line.split(None, 4) for line in lines)  # own s, share, calls, cumulative s, file:line(function)
    calls = {where.rsplit("(", 1)[1].rstrip(")"): int(count) for _, _, count, _, where in columns}
    assert lines[0].endswith("(<genexpr>)") and calls["<genexpr>"] == 3 * 200_001  # the most own time first
    assert calls["sum_of_squares"] == 3  # once a step


def test_without_profile_no_statistics_are_written(tmp_path):
    run_core(PROFILED_CORE, tmp_path)
    assert not list(tmp_path.glob("*.prof"))
