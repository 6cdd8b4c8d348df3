"""Tests of course_admin/intake/: submissions, manifests, written answers and formgrader's scores read as data."""
