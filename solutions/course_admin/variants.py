"""Load the known-wrong variants of a chapter (solutions/mistakes/chNN.py) as patched implementations."""
from __future__ import annotations

from pathlib import Path
from types import ModuleType

from course_lib.provided.loader import REPO_ROOT, PatchedImpl, load_file, load_impl

MISTAKES_DIR = REPO_ROOT / "solutions" / "mistakes"


def _module(chapter: str) -> ModuleType | None:
    path = MISTAKES_DIR / f"ch{chapter}.py"
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
