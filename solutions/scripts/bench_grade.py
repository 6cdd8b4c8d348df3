"""Benchmark `course grade` on a class of synthetic learners, the warm sandbox beside the cold way.

The command line of ``course_admin.measure.bench_grade``, where the code lives (importable, and imported by its
tests); ``--help`` and that module's docstring say how to use it.
"""
from course_admin.measure.bench_grade import main

if __name__ == "__main__":
    raise SystemExit(main())
