"""Measuring helpers for benchmarks and the book: median wall time and memory of one call.

Speed is always reported as a ratio against a peer measured in the same run (e.g. our attention vs
torch.nn.functional.scaled_dot_product_attention), never as an absolute promise.
"""
from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator

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


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Mute file descriptor 2 (the profiler's start/stop chatter) while the block runs."""
    saved = os.dup(2)
    with open(os.devnull, "w", encoding="utf-8") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def peak_bytes(fn: Callable[[], object]) -> int:
    """The largest allocation total of a single operator during one call of ``fn()``, by torch.profiler.

    Not the peak of the call: allocations of different operators are not added up, and what is freed
    is not subtracted. For one operator (an attention's scores) it is close; for a training step use
    ``peak_tensor_bytes``.
    """
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return max((e.cpu_memory_usage for e in prof.key_averages()), default=0)


def peak_tensor_bytes(fn: Callable[[], object]) -> int:
    """The peak of CPU tensor memory alive during one call of ``fn()``: tensors made before it (parameters,
    optimizer state) and during it (activations, gradients), from torch.profiler's memory timeline."""
    with tempfile.TemporaryDirectory(prefix="peak-tensor-bytes-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # export_memory_timeline is deprecated for CUDA; the CPU has no successor
        with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                                      with_stack=True) as prof:
            fn()
        path = Path(tmp) / "timeline.json"
        with _quiet_stderr():
            prof.export_memory_timeline(str(path), device="cpu")
        times, sizes = json.loads(path.read_text(encoding="utf-8"))  # sizes: per time, bytes by category
    return int(max((sum(column) for column in sizes), default=0))


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (PyTorch's own libraries included), from ``getrusage``; 0 (not
    measured) on Windows, which has no ``resource`` module (the book's page 03 imports this module there too)."""
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux
