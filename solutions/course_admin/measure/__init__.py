"""How good the checks are and how fast things run: measured, printed as ratios against a peer in the same run.

Mutation testing of the reference against the checks (mutation.py), `course grade` on a synthetic class
(bench_grade.py), the course's encoder against PyTorch's (bench_encoder.py). Their command lines are
solutions/scripts/*.py.

May import: ``release``, ``grading`` (the hidden cases a mutant is graded by).
"""
