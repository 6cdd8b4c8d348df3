"""Benchmark the course's encoder against PyTorch's: training throughput and peak memory, in one run.

The command line of ``course_admin.measure.bench_encoder``, where the code lives (importable, and imported by its
tests); ``--help`` and that module's docstring say how to use it.
"""
from course_admin.measure.bench_encoder import main

if __name__ == "__main__":
    raise SystemExit(main())
