"""Tests of course_admin/sandbox/: the cold and warm sandboxes, the seccomp filter, process control, result frames."""
