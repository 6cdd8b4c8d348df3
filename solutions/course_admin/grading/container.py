"""Which isolation `course grade` gets in a container that may not let bubblewrap start: Gradescope's.

On a machine of the instructor's, `course grade` refuses to run learner code outside bubblewrap unless
told to trust the learners (grade.py). In a container that holds one upload and is thrown away after
it, the container itself is the boundary between learners, and what can be had inside it is enough:
``container_isolation`` says which, for `course gradescope run` (exports/gradescope.py).
"""
from __future__ import annotations

import os

from ..sandbox import confine, procs


def container_isolation(isolation: str) -> tuple[list[str], str]:
    """(`course grade`'s isolation options, what the instructor is told) for this container; raises
    RuntimeError with the cause and the fix when learner code must not run here at all.

    ``bwrap``: bubblewrap or nothing. ``auto`` (the default): bubblewrap where it starts; where it does
    not (Docker's default confinement: no CAP_SYS_ADMIN, no new namespaces), the container confinement:
    every learner process under the seccomp filter (NO_NEW_PRIVS needs no capability; it refuses every
    socket but a unix one, so nothing can be sent out though the container's network is open), as an
    unprivileged uid with no capability that can read neither solutions/ nor the expected values nor
    /autograder/results, with rlimits; the container, thrown away after each upload, is the boundary
    between learners."""
    ok, why_not = procs.bwrap_works()
    if ok and os.environ.get(procs.SWITCH) != "rlimits":
        return ["--isolation", "bwrap"], "learner code ran in bubblewrap's sandbox"
    if isolation == "bwrap":
        raise RuntimeError(f"this zip grades in bubblewrap only (built with --isolation bwrap), and bubblewrap "
                           f"cannot start in this container: {why_not}. Build the zip without --isolation bwrap "
                           "to grade in the container's own confinement")
    filtered, no_filter = confine.available()
    if os.geteuid() != 0:
        raise RuntimeError("run_autograder is not running as root, so learner code cannot be given a uid of its "
                           "own; Gradescope runs it as root: run it as root")
    read_all, how = procs.unprivileged()
    problems = ([no_filter] if not filtered else []) + ([how] if read_all is None else [])
    if problems:
        raise RuntimeError(f"bubblewrap cannot start here ({why_not}), and the container confinement is not "
                           f"complete: {'; '.join(problems)}. setup.sh installs libseccomp2; rebuild the image")
    return (["--isolation", "rlimits", "--trust-learners"],
            f"bubblewrap cannot start in this container ({why_not[:160]}), so learner code ran in the container "
            f"confinement: {how}, under the seccomp filter and rlimits, with this container (one per upload, "
            "thrown away after it) as the boundary between learners")
