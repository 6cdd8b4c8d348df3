"""Tests of The chapters' checks (course_lib/provided/checking.py, tests/specs/): they reward right code and name known mistakes."""
