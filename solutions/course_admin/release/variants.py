"""Load the known-wrong variants of a chapter (solutions/mistakes/chNN.py) as patched implementations."""
from __future__ import annotations

from types import ModuleType

from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import PatchedImpl, load_file, load_impl


def _module(chapter: str) -> ModuleType | None:
    path = LAYOUT.mistakes_file(chapter)
    if not path.is_file():
        return None
    return load_file(f"course_mistakes_ch{chapter}", path)


def wrong_impls(chapter: str) -> dict[str, PatchedImpl]:
    """{mistake name: the reference with that mistake planted}."""
    module = _module(chapter)
    if module is None:
        return {}
    ref = load_impl("reference")
    return {name: PatchedImpl(ref, overrides, label=name) for name, overrides in module.VARIANTS.items()}
