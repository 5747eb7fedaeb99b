"""The GPU's bf16 matrix rate, 8192^3, median of 10 after 3 warm-ups (three input pairs in rotation): the FLOP
ceiling against which every system's useful FLOP/s is read."""

from __future__ import annotations

import statistics
import time

from benchmarks.procs import log
from benchmarks.settings import Settings


def run(s: Settings, result: dict, pgid_file=None) -> None:
    import torch

    n = 1024 if s.tiny else 8192
    dtype = torch.bfloat16 if s.device == "cuda" else torch.float32
    gen = torch.Generator(device=s.device).manual_seed(0)
    pairs = [(torch.randn(n, n, device=s.device, dtype=dtype, generator=gen),
              torch.randn(n, n, device=s.device, dtype=dtype, generator=gen)) for _ in range(3)]
    times = []
    for i in range(13):  # 3 warm-up, 10 timed; inputs rotate among three pairs
        a, b = pairs[i % 3]
        if s.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            c = a @ b
            end.record()
            torch.cuda.synchronize()
            dt = start.elapsed_time(end) / 1000
        else:
            t0 = time.perf_counter()
            c = a @ b
            dt = time.perf_counter() - t0
        if i >= 3:
            times.append(dt)
    if not torch.isfinite(c.float()).all():
        raise RuntimeError("non-finite matmul output")
    med = statistics.median(times)
    result.update({
        "n": n, "dtype": str(dtype), "device": torch.cuda.get_device_name(0) if s.device == "cuda" else "cpu",
        "median_s": med, "times_s": times, "flops_per_s": 2 * n**3 / med,
        "tflops": round(2 * n**3 / med / 1e12, 1),
    })
    log(f"  matmul {n}^3 {dtype}: {result['tflops']} TFLOP/s (median of 10)")
