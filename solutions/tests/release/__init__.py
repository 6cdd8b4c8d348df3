"""Tests of course_admin/release/: the generated learner files in sync, the learner tree, the notebooks' facts."""
