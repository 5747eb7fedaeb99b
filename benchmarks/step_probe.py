"""Timestamps of vLLM's front end and engine core, in every process of a benchmark run that imports vLLM.

Loaded at interpreter start (gpu_run.sh with STEP_PROBE=1 writes the `.pth` line and `sitecustomize.py` that import
it), it wraps, as their modules are imported: `AsyncLLM._add_request` (a sequence handed to the engine core),
`EngineCore.add_request` (the engine core takes it into its scheduler), `Scheduler.schedule` (tokens and sequences
of a step), `EngineCore.step` (the step's wall and CPU time) and `OutputProcessor.process_outputs` (answers back in
the front end), the engine step's `AsyncEngine.submit` (Triton's thread hands a request over) and `._run` (the
request on the engine step's event loop, to its scores), and the preprocess step's `Preprocessor.run`, `.encode`
and `BoundedTokenizer.encode_batch` (its documents' tokenization). Records are JSON lines in
$STEP_PROBE_DIR/<pid>.jsonl, written every 2 s and at exit (an engine core stopped with its server never reaches its
exit handlers: written every 10 s, a server's last level of steps was lost); `benchmarks/step_report.py` turns them
into each request's timeline. With STEP_PROBE_ENGINE_CPUS set, each engine core moves onto those CPUs before its
first step. With STEP_PROBE_PROFILE=1 each engine core's steps also run under cProfile, its statistics written to
$STEP_PROBE_DIR/<pid>.prof (what a step's CPU time is spent on; step_report prints the top of each). The same probe
runs in the Triton engine
step's processes and the direct engine's, so what it costs is paid on both sides. Only for measuring.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time

DIR = os.environ.get("STEP_PROBE_DIR", "/tmp/step_probe")
FLUSH_S = 2.0
# The engine core's own CPUs ("14-15"; gpu_run.sh's ENGINE_CPUS, which starts everything else on the other CPUs):
# an engine core moves all its threads there before its first step. Empty: nothing moves.
ENGINE_CPUS = os.environ.get("STEP_PROBE_ENGINE_CPUS", "")
# Each engine core's steps under cProfile (it slows what it measures: a separate reading from the timed ones); the
# statistics are rewritten every PROFILE_WRITE_S, as an engine core stopped with its server never reaches atexit.
PROFILE = os.environ.get("STEP_PROBE_PROFILE", "") not in ("", "0")
PROFILE_WRITE_S = 5.0
_records: list[dict] = []
_lock = threading.Lock()
_state = {"pid": os.getpid(), "flushed": time.time()}


def flush() -> None:
    with _lock:
        lines, _records[:] = list(_records), []
    if lines:
        os.makedirs(DIR, exist_ok=True)
        with open(f"{DIR}/{os.getpid()}.jsonl", "a") as out:
            out.write("".join(json.dumps(r) + "\n" for r in lines))
    _state["flushed"] = time.time()


def record(**fields) -> None:
    if os.getpid() != _state["pid"]:  # a forked child: its own file
        _forked()
    _records.append(fields)
    if time.time() - _state["flushed"] > FLUSH_S:
        flush()


def _forked() -> None:
    _records.clear()
    _state["pid"] = os.getpid()
    _process()


def _process() -> None:
    _records.append({"ev": "process", "pid": os.getpid(), "ppid": os.getppid(), "exe": sys.executable,
                     "argv": sys.argv[:3], "cpus": len(os.sched_getaffinity(0))})


def _wrap_core(module) -> None:
    core = module.EngineCore
    for name in ("step", "step_with_batch_queue"):
        original = getattr(core, name, None)
        if original is not None:
            setattr(core, name, _timed_step(original))
    add = core.add_request

    def add_request(self, request, *args, **kwargs):
        record(ev="core_add", t=time.time(), rid=request.request_id)
        return add(self, request, *args, **kwargs)
    core.add_request = add_request


def cpu_list(text: str) -> set[int]:
    """`taskset -c` notation ("14-15", "2,5-7") as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def pin_process(cpus: set[int]) -> None:
    """Every thread of this process onto `cpus` (sched_setaffinity moves one thread; threads started later inherit)."""
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), cpus)
    record(ev="pinned", cpus=sorted(cpus))


def _profiler():
    """The process's one cProfile.Profile of its steps, whichever step function vLLM runs (both are wrapped): made at
    the first step and written at exit, so that no second, idle profile overwrites its file."""
    if "profiler" not in _state:
        import cProfile

        _state["profiler"], _state["profile_written"] = cProfile.Profile(), time.time()
        atexit.register(_write_profile)
    return _state["profiler"]


def _write_profile() -> None:
    os.makedirs(DIR, exist_ok=True)
    _state["profiler"].dump_stats(f"{DIR}/{os.getpid()}.prof")
    _state["profile_written"] = time.time()


def _profiled(original):
    """`original` (an engine core's step) run under the process's profiler, written to <pid>.prof now and then."""
    def step(self, *args, **kwargs):
        profiler = _profiler()
        profiler.enable()
        try:
            return original(self, *args, **kwargs)
        finally:
            profiler.disable()
            if time.time() - _state["profile_written"] > PROFILE_WRITE_S:
                _write_profile()
    return step


def _timed_step(original):
    if PROFILE:
        original = _profiled(original)

    def step(self, *args, **kwargs):
        if ENGINE_CPUS and not _state.get("pinned"):
            _state["pinned"] = True
            pin_process(cpu_list(ENGINE_CPUS))
        t0, cpu0 = time.time(), time.thread_time()
        out = original(self, *args, **kwargs)
        outputs = out[0] if isinstance(out, tuple) else None
        answered = sum(len(o.outputs) for o in outputs.values()) if isinstance(outputs, dict) else None
        record(ev="step", t0=t0, t1=time.time(), cpu_ms=round((time.thread_time() - cpu0) * 1e3, 3), nout=answered)
        return out
    return step


def _wrap_scheduler(module) -> None:
    original = module.Scheduler.schedule

    def schedule(self, *args, **kwargs):
        t0 = time.time()
        out = original(self, *args, **kwargs)
        record(ev="sched", t0=t0, ntok=out.total_num_scheduled_tokens, nreq=len(out.num_scheduled_tokens))
        return out
    module.Scheduler.schedule = schedule


def _wrap_front_end(module) -> None:
    original = module.AsyncLLM._add_request

    async def _add_request(self, request, *args, **kwargs):
        record(ev="fe_add", t=time.time(), rid=request.request_id)
        return await original(self, request, *args, **kwargs)
    module.AsyncLLM._add_request = _add_request


def _wrap_outputs(module) -> None:
    original = module.OutputProcessor.process_outputs

    def process_outputs(self, outputs, *args, **kwargs):
        t0 = time.time()
        result = original(self, outputs, *args, **kwargs)
        record(ev="fe_out", t0=t0, t1=time.time(), n=len(outputs))
        return result
    module.OutputProcessor.process_outputs = process_outputs


def _timed(kind: str, original):
    def timed(*args, **kwargs):
        t0 = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            record(ev=kind, t0=t0, t1=time.time())
    return timed


def _wrap_engine_step(module) -> None:
    """The engine step around vLLM: when `execute` hands a request over, and its coroutine's start and end on the
    step's event loop (the end: its scores computed from vLLM's outputs)."""
    engine = module.AsyncEngine
    engine.submit = _timed("eng_submit", engine.submit)
    run = engine._run

    async def _run(self, batch, request_id, *args, **kwargs):
        t0 = time.time()
        try:
            return await run(self, batch, request_id, *args, **kwargs)
        finally:
            record(ev="eng_run", t0=t0, t1=time.time(), rid=request_id)
    engine._run = _run


def _wrap_preprocess(module) -> None:
    """The preprocess step's own time: a request's whole run (parse and encode), its encoding, and within that the
    documents' tokenization."""
    module.Preprocessor.run = _timed("pre_run", module.Preprocessor.run)
    module.Preprocessor.encode = _timed("pre_encode", module.Preprocessor.encode)


def _wrap_tokenization(module) -> None:
    module.BoundedTokenizer.encode_batch = _timed("pre_tokenize", module.BoundedTokenizer.encode_batch)


WRAPS = {"vllm.v1.engine.core": _wrap_core, "vllm.v1.core.sched.scheduler": _wrap_scheduler,
         "vllm.v1.engine.async_llm": _wrap_front_end, "vllm.v1.engine.output_processor": _wrap_outputs,
         "python_backends.engine.step": _wrap_engine_step, "python_backends.preprocess.step": _wrap_preprocess,
         "python_backends.encoding.tokenization": _wrap_tokenization}


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of WRAPS as the other finders do, and wraps them once they have run."""

    def find_spec(self, name, path, target=None):
        if name not in WRAPS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module, run=run, name=name):
                run(module)
                try:
                    WRAPS[name](module)
                except Exception as exc:  # noqa: BLE001 - a release with other names: measured without the probe
                    record(ev="probe_error", module=name, error=repr(exc))
            spec.loader.exec_module = exec_module
        return spec


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
    _process()
    atexit.register(flush)
