"""Tests of The reference implementation's docstrings: shapes stated, examples that run."""
