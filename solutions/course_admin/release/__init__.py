"""What learners receive, and what their code is judged against: generated from solutions/, never edited.

`course release` (release.py) writes the stubs (stubs.py), the exercises and the learner tree
(learner_tree.py), and the facts in the source notebooks (notebook_facts.py, capstone_times.py);
`course refs` (refs.py) saves the reference's outputs and those of the known-wrong variants (variants.py).

May import: ``course_lib.provided``, ``intake`` (a notebook's written answers, read as data) and ``book`` (the Chinese
edition's rules of typography and terms, which the messages' translations follow too: messages.py).
"""
