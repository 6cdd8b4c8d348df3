"""Tests of course_admin/grading/: `course grade` on planted classes, the plan of cases, the verdict."""
