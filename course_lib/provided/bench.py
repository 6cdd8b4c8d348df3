"""Measuring helpers for benchmarks and the book: median wall time and peak CPU memory of one call.

Speed is always reported as a ratio against a peer measured in the same run (e.g. our attention vs
torch.nn.functional.scaled_dot_product_attention), never as an absolute promise.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable

from torch.profiler import ProfilerActivity, profile


def median_seconds(fn: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_bytes(fn: Callable[[], object]) -> int:
    """Largest CPU allocation total of one call of ``fn()``, by torch.profiler.

    The profiler's start/stop chatter on file descriptor 2 is muted while it runs.
    """
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return max((e.cpu_memory_usage for e in prof.key_averages()), default=0)
