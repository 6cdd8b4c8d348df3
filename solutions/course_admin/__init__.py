"""The instructor's tools: `course release`, `refs`, `grade`, `report`, `gradescope`, `feedback`. Not shipped to learners.

One folder a responsibility, listed in the order the data goes through them, each with what it may import
besides ``course_lib.provided`` (``solutions/tests/test_architecture.py`` holds every import to this table):

    folder      what it does                                                          may import
    release/    what learners receive and what they are judged against: stubs,        intake
                exercises, the learner tree, notebook facts, reference outputs and
                the known-wrong variants, capstone times
    intake/     what comes back: submissions found, named and read as bytes, their    (nothing)
                manifests, a notebook's written answers read as data, formgrader's
                hand-graded scores
    sandbox/    running learner code: the cold run, the warm sandbox with its fork    (nothing)
                server and child, the seccomp filter, process control, the reaper,
                result frames checked
    grading/    a batch of submissions: the plan of cases, one learner's sandboxed    release, intake,
                run, the trusted verdict, the worker pool, `course grade` itself       sandbox, records
    records/    the grade table, one typed row per graded component, and the files   intake
                made from it: grades.csv, totals.csv, feedback/, the LMS files
    exports/    for people and platforms: the class report and its page,             intake, grading,
                Gradescope's bundle and results, the hub's feedback                    records
    measure/    how good and how fast: mutation testing of the checks, the grading    release, grading
                and the encoder benchmarks
    book/       the book's Sphinx extensions, and the built book checked in a browser  (nothing)
"""
