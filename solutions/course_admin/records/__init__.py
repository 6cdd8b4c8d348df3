"""The grade table and the files made from it, written only by the grading parent.

One typed row per graded component (rows.py), the SQLite table committed learner by learner
(gradebook.py), grades.csv, totals.csv and the feedback files (report.py), the LMS files (lms.py).

May import: ``intake`` (a learner id's file name).
"""
