"""The project's own tests: a package, so that tests import their helpers by name and nothing edits sys.path.

The tests of the instructor's tools follow solutions/course_admin/'s folders (sandbox/, intake/, release/,
grading/, records/, exports/, measure/, book/): the test of ``course_admin/sandbox/confine.py`` is
``sandbox/test_confine.py``. Beside them: checks/ (the chapters' checks reward the reference and name every
known mistake), reference/ (the reference's docstrings), capstone/ (the capstone's data, runs and harness)
and test_syllabus.py. The planted learners the grading tests share are modules here (planted.py,
planted_holes.py, planted_results.py, sandbox_runs.py), imported as ``from .. import planted``.
"""
