"""One way to reach an implementation of course_lib: the learner's, or the reference.

The book, the tests and the grader all go through `load_impl`, so that a result never depends on
how the caller found the modules.

    impl = load_impl("reference")          # the package course_ref (solutions/course_ref/, instructors only)
    impl.attention.scaled_dot_product_attention(q, k, v)
    impl = load_impl("learner")            # the package course_lib (this tree's course_lib/)
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

from .layout import LAYOUT, REFERENCE_PACKAGE


class Impl:
    """Attribute access to the chapter modules of one implementation: ``impl.attention``."""

    def __init__(self, package: str, label: str) -> None:
        self.package = package
        self.label = label

    def __getattr__(self, module: str) -> ModuleType:
        if module.startswith("_"):
            raise AttributeError(module)
        return importlib.import_module(f"{self.package}.{module}")

    def __repr__(self) -> str:
        return f"Impl({self.label!r})"


class PatchedImpl:
    """An implementation with some functions replaced, e.g. by a known-wrong variant.

    ``PatchedImpl(ref, {"attention.scaled_dot_product_attention": wrong_fn})``
    """

    def __init__(self, base: Any, overrides: dict[str, Callable[..., Any]], label: str = "patched") -> None:
        self._base = base
        self._overrides = overrides
        self.label = label

    def __getattr__(self, module: str) -> Any:
        if module.startswith("_"):
            raise AttributeError(module)
        real = getattr(self._base, module)
        mine = {k.split(".", 1)[1]: v for k, v in self._overrides.items() if k.split(".", 1)[0] == module}
        if not mine:
            return real
        namespace = SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
        for name, fn in mine.items():
            setattr(namespace, name, fn)
        return namespace


def load_file(name: str, path: Path) -> ModuleType:
    """Import the Python file ``path`` as module ``name`` once (a chapter spec, hidden cases, variants)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def load_impl(which: str = "reference") -> Impl:
    """Return the reference (``"reference"``) or the learner's (``"learner"``) implementation."""
    if which == "reference":
        if importlib.util.find_spec(REFERENCE_PACKAGE) is None:
            raise FileNotFoundError(
                f"the reference implementation ({REFERENCE_PACKAGE}, {LAYOUT.rel(LAYOUT.reference)}/) ships only "
                "with the instructor's repository. Learners: use load_impl('learner')."
            )
        return Impl(REFERENCE_PACKAGE, "reference")
    if which == "learner":
        return Impl("course_lib", "learner")
    raise ValueError(f"load_impl: which must be 'reference' or 'learner', got {which!r}")
