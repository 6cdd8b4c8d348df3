"""Tests of course_admin/measure/: mutation testing and the benchmarks measure what they say."""
