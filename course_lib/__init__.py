"""course_lib: the Transformer you build in this course, one chapter at a time.

The modules at this level (``attention.py``, ...) are yours to implement: each function body
raises ``NotImplementedError`` until you write it. ``course_lib.provided`` holds the helpers the
course gives you (checks, loader, data, plots); you use them but never edit them.

Nothing is imported eagerly, so a mistake in one chapter never breaks another chapter's checks.
"""

__all__: list[str] = []
