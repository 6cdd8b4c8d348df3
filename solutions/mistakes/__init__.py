"""Known-wrong variants of each chapter's functions (instructors only: they are near-solutions).

`course refs` saves their outputs next to the reference's so that a check can name a mistake;
the grader computes them live on hidden cases; the tests assert each one loses points.
"""
