"""The instructor's tools: `course release`, `refs`, `grade`, `report`, `gradescope` and `feedback`.

Not shipped to learners. One folder a responsibility, listed in the order the data goes through them; each
folder's docstring says what it does and which of the others it may import ("May import: ..."), which
``solutions/tests/test_architecture.py`` holds every import to:

    release/    what learners receive and what they are judged against: stubs, exercises, the learner tree,
                notebook facts, reference outputs and the known-wrong variants, capstone times
    intake/     what comes back: submissions found, named and read as bytes, their manifests, a notebook's
                written answers read as data, formgrader's hand-graded scores
    sandbox/    running learner code: the cold run, the warm sandbox with its fork server and child, the
                seccomp filter, process control, the reaper, result frames checked
    grading/    a batch of submissions: the plan of cases, one learner's sandboxed run, the trusted
                verdict, the worker pool, `course grade` itself
    records/    the grade table, one typed row per graded component, and the files made from it:
                grades.csv, totals.csv, feedback/, the LMS files
    exports/    for people and platforms: the class report and its page, Gradescope's bundle and results,
                the hub's feedback
    measure/    how good and how fast: mutation testing of the checks, the grading and encoder benchmarks
    book/       the book's Sphinx extensions, and the built book checked in a browser
"""
