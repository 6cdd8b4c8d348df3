"""Tests of course_admin/exports/: the class report, Gradescope's zip and results, the nbgrader exchange loop."""
