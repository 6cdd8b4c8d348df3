"""Running learner code, contained: the only folder whose code starts learner processes.

Which isolation there is (procs.py), the cold run (cold.py), the warm sandbox (warm.py) with its fork
server (zygote.py) and the grading child that calls the learner's code (child.py), the seccomp filter
every learner process gets (confine.py), ending what a run started (reaper.py), a run's output drained from a pipe into a capped log
(output.py), and the result frames
checked before the grader loads them (results.py). zygote.py, child.py and confine.py are copied into
the sandbox and run there under ``python -I -S``.

May import: nothing of course_admin (inside the sandbox, only the instructor's ``course_lib.provided``).
"""
