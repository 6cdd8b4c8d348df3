"""Tests of The capstone (course_lib/provided/capstone/, training.py): its data, recorded runs and harness."""
