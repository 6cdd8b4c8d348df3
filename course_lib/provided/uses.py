"""Which earlier chapters a chapter's code uses: the course_lib modules it imports, followed through them.

A failed check is headed "fix chapter NN first" only when chapter NN fails its own checks *and* this
chapter's code imports it (seed 000's classifier imports no encoder: its failures are its own). The code is
read, never run: ``course check`` reads the learner's files, the grader reads the submitted bytes.
"""
from __future__ import annotations

import ast
from collections.abc import Callable

from .layout import chapter_facts, owner_of

Source = Callable[[str], "str | bytes | None"]  # a module file ("attention.py") -> its source, None if absent


def imported_modules(source: str | bytes | None) -> set[str]:
    """The course_lib modules a source imports ("encoder.py"): ``from .encoder import``, ``from . import encoder``,
    ``import course_lib.encoder``, ``from course_lib.encoder import``; none when it does not parse."""
    try:
        tree = ast.parse(source or "")
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError (NUL bytes), RecursionError: not readable Python
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 or base == "course_lib" or base.startswith("course_lib."):
                base = base.removeprefix("course_lib").lstrip(".")
                found |= {f"{base}.py"} if base else {f"{a.name}.py" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {f"{a.name.split('.')[1]}.py" for a in node.names if a.name.startswith("course_lib.")}
    return found


def used_chapters(number: str, source: Source) -> set[str]:
    """The earlier chapters whose modules chapter ``number``'s modules import, directly or through them."""
    seen, todo, used = set(), list(chapter_facts(number).modules), set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for other in imported_modules(source(module)):
            try:
                owner = owner_of(other)
            except Exception:  # noqa: BLE001 - not a chapter's module (a helper of the learner's own)
                continue
            if owner != number:
                used.add(owner)
            todo.append(other)
    return used
