"""Tests of course_admin/records/: the grade table's files (grades.csv, feedback)."""
