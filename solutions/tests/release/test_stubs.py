"""Stubs from solution modules (course_admin/release/stubs.py): each solution block becomes a
``raise NotImplementedError`` naming the chapter and the function, the rest of the module is kept, and a
malformed marker is an error naming the file and the line."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from course_admin.release.stubs import ReleaseError, strip_solutions
from course_lib.provided.layout import REPO_ROOT


def load_stub():
    spec = importlib.util.spec_from_file_location("stub_attention_under_test", REPO_ROOT / "course_lib" / "attention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stub_raises_not_implemented_naming_chapter_and_function():
    stub = load_stub()
    q = k = v = torch.randn(1, 2, 4)
    with pytest.raises(NotImplementedError) as caught:
        stub.scaled_dot_product_attention(q, k, v)
    message = str(caught.value)
    for part in ("Chapter 02", "scaled_dot_product_attention", "course_lib/attention.py", "exercises/ch02_attention"):
        assert part in message, message
    # Code outside the solution block survives: the mask's dtype check and the docstring.
    with pytest.raises(TypeError, match="bool"):
        stub.scaled_dot_product_attention(q, k, v, mask=torch.ones(1, 2, 2))
    ref_spec = importlib.util.spec_from_file_location("ref_attention_under_test", REPO_ROOT / "solutions" / "course_ref" / "attention.py")
    ref = importlib.util.module_from_spec(ref_spec)
    ref_spec.loader.exec_module(ref)
    assert stub.scaled_dot_product_attention.__doc__ == ref.scaled_dot_product_attention.__doc__
    assert stub.__doc__ == ref.__doc__
    head = (REPO_ROOT / "course_lib" / "attention.py").read_text(encoding="utf-8").splitlines()[:3]
    assert all(line.startswith("#") for line in head) and "course release" in " ".join(head)


def test_strip_names_methods_and_keeps_indentation():
    source = (
        "class Widget:\n"
        "    def forward(self, x):\n"
        '        """Doc stays."""\n'
        "        if x:\n"
        "            ### BEGIN SOLUTION\n"
        "            return 1\n"
        "            ### END SOLUTION\n"
        "        ### BEGIN SOLUTION\n"
        "        return 2\n"
        "        ### END SOLUTION\n"
    )
    stub = strip_solutions(source, "widget.py", "implement {function}")
    assert stub == (
        "class Widget:\n"
        "    def forward(self, x):\n"
        '        """Doc stays."""\n'
        "        if x:\n"
        '            raise NotImplementedError("implement Widget.forward")\n'
        '        raise NotImplementedError("implement Widget.forward")\n'
    )


# ------------------------------------------------------------------ (f) the strip function's errors
GOOD = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"


@pytest.mark.parametrize("source, line, words", [
    ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", 2, "never closed"),
    ("def f():\n    return 1\n    ### END SOLUTION\n", 3, "without a `### BEGIN SOLUTION`"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n", 3, "nested"),
    ("x = 1\n### BEGIN SOLUTION\ny = 2\n### END SOLUTION\n", 2, "outside a function"),
    ("class C:\n    ### BEGIN SOLUTION\n    y = 2\n    ### END SOLUTION\n", 2, "outside a function"),
    ("def f():\n    return 1  ### BEGIN SOLUTION\n", 2, "alone on its line"),
], ids=["begin-without-end", "end-without-begin", "nested", "module-level", "class-body", "marker-after-code"])
def test_strip_errors_name_file_and_line(source, line, words):
    with pytest.raises(ReleaseError) as caught:
        strip_solutions(source, "solutions/course_ref/broken.py", "implement {function}")
    assert f"solutions/course_ref/broken.py:{line}:" in str(caught.value)
    assert words in str(caught.value)
    assert "raise NotImplementedError" in strip_solutions(GOOD, "ok.py")  # the same function accepts good input
