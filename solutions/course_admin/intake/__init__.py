"""What comes back from learners and from hand grading, read as data: nothing here runs learner code.

Submissions found, named by what the instructor collected (names.py) and read with bounds (submissions.py), what
their manifests say (manifest.py), a notebook's written answers (answers.py), formgrader's scores
(manual.py).

May import: ``course_lib.provided`` only.
"""
