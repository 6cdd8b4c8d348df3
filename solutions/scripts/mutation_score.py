"""Mutation testing of the reference: how many plausible wrong versions of it the checks catch.

The command line of ``course_admin.measure.mutation``, where the code lives (importable, and imported by its
tests); ``--help`` and that module's docstring say how to use it.
"""
from course_admin.measure.mutation import main

if __name__ == "__main__":
    raise SystemExit(main())
