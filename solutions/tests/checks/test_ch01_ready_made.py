"""Chapter 01's ready-made case: an RNN that calls PyTorch's recurrent kernels loses exactly "built from scratch".

The learner package below is the reference with one line changed, so every value is right: only the
static scan of its source (READY_MADE in tests/specs/ch01.py) can tell, and it does.
"""
from __future__ import annotations

import pytest

from course_lib.provided import chapters
from course_lib.provided.checking import ready_made_uses, total
from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import Impl

PATTERNS = chapters.load_spec("01").READY_MADE["rnn.py"]
REFERENCE = (LAYOUT.reference / "rnn.py").read_text(encoding="utf-8")
READY = {  # the body of rnn_step (and the module's imports) replaced by a PyTorch kernel
    "torch.rnn_tanh_cell": "return torch.rnn_tanh_cell(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh)",
    "torch._VF": "return torch._VF.rnn_tanh_cell(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh)",
    "torch.nn.RNNCell": "cell = nn.RNNCell(x_t.shape[-1], h_prev.shape[-1]).to(x_t.dtype)\n"
                        "    weights = dict(weight_ih=weight_ih, weight_hh=weight_hh, bias_ih=bias_ih, bias_hh=bias_hh)\n"
                        "    return torch.func.functional_call(cell, weights, (x_t, h_prev))",
}


def _package(root, name: str, body: str) -> str:
    start = REFERENCE.index("    from_input = x_t @ weight_ih.T")
    end = REFERENCE.index("    ### END SOLUTION", start)
    source = REFERENCE[:start] + "    " + body + "\n" + REFERENCE[end:]
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "rnn.py").write_text(source)
    return name


def test_reference_uses_no_ready_made_layer() -> None:
    assert ready_made_uses(REFERENCE, PATTERNS) == []


@pytest.mark.parametrize("kernel", READY)
def test_ready_made_rnn_loses_exactly_built_from_scratch(kernel: str, tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    package = _package(tmp_path, f"ready_{abs(hash(kernel))}", READY[kernel])
    results = chapters.run_chapter("01", Impl(package, kernel))
    failed = [r for r in results if r.status != "pass"]
    assert [r.case for r in failed] == ["built from scratch"], [r.message for r in failed]
    assert f"ready-made {kernel}" in failed[0].message
    assert total(results)[0] == total(results)[1] - failed[0].points
