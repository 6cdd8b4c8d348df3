"""Load the known-wrong variants of a chapter (solutions/mistakes/chNN.py) as patched implementations."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from course_lib.provided.loader import REPO_ROOT, PatchedImpl, load_impl

MISTAKES_DIR = REPO_ROOT / "solutions" / "mistakes"


def _module(chapter: str) -> ModuleType | None:
    path = MISTAKES_DIR / f"ch{chapter}.py"
    if not path.is_file():
        return None
    name = f"course_mistakes_ch{chapter}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def wrong_impls(chapter: str) -> dict[str, PatchedImpl]:
    """{mistake name: the reference with that mistake planted}."""
    module = _module(chapter)
    if module is None:
        return {}
    ref = load_impl("reference")
    return {name: PatchedImpl(ref, overrides, label=name) for name, overrides in module.VARIANTS.items()}
