"""A batch of submissions graded: `course grade` (grade.py).

The plan of a chapter's cases and the values they are judged against (plan.py), one learner's
course_lib run in a sandbox (sandboxed.py: its cases by chapter and phase in segment.py, timed by
watch.py) and read as source where a case is decided by reading
(source_scan.py), the trusted verdict on what the child returned (verdict.py), and the pool of worker
processes in which a crash costs only its learner (batch.py); the isolation a throwaway container such
as Gradescope's can give (container.py).

May import: ``release`` (reference outputs, variants), ``intake``, ``sandbox``, ``records``.
"""
