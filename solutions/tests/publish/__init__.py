"""Tests of course_admin/publish/ and of the workflows in .github/workflows/ (actionlint, permissions, pins)."""
