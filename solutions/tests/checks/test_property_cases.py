"""Property cases that a constant output passed (issue 17, point 5).

A property case checks something whose expected value does not depend on what the code computes: the
inputs left unchanged (02), what dropout does and the error past max_len (04), no future leak (06), the
loss of a batch of padding only (07), padding that changes nothing (08). Each earns its points only when
the same case's outputs show the code computes something: an output compared with the reference's (04,
06, 07, 08) or, for the inputs left unchanged, an output that depends on the query (02). Planted: for each,
code that computes nothing (a constant, or an exception every time) where that case looks, and is
otherwise the reference, scores 0 on those cases, public and hidden, judged as the grader judges them.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from course_lib.provided import chapters
from course_lib.provided.checking import Case, judge, run_probe
from course_lib.provided.loader import PatchedImpl, load_impl

from course_admin.grading.plan import hidden_cases

REF = load_impl("reference")


def constant_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                       dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Zeros of the promised shapes, inputs untouched: (..., seq_q, d_v) and (..., seq_q, seq_k)."""
    return (query.new_zeros(*query.shape[:-1], value.size(-1)),  # (..., seq_q, d_v)
            query.new_zeros(*query.shape[:-1], key.size(-2)))     # (..., seq_q, seq_k)


class AlwaysRaises(REF.positional.PositionalEncoding):
    """Raises the promised ValueError, naming seq and max_len, for every sequence."""

    def forward(self, x: Tensor) -> Tensor:
        raise ValueError(f"sequence length {x.size(1)} is longer than max_len {self.max_len}")


class DroppedOnes(REF.positional.PositionalEncoding):
    """Dropout done right, on a constant: dropout(ones) whatever x."""

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(torch.ones_like(x))  # (batch, seq, d_model)


class ZeroLogits(REF.transformer.Transformer):
    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.generator.weight.new_zeros(*tgt.shape, self.config.tgt_vocab)  # (batch, tgt_seq, tgt_vocab)


class ZeroLoss(REF.seq2seq.LabelSmoothingLoss):
    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return (logits * 0).sum()  # () 0, with a gradient of zeros


class ConstantClassifier(REF.classifier.TransformerClassifier):
    """Every member (the weights load), but no encoder run and the same logits for every review."""

    def encode(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.positional(self.embed(tokens))  # (batch, seq, d_model)

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.head.bias.expand(tokens.size(0), -1)  # (batch, num_classes)


def _probe(*names: str) -> Callable[[Case], bool]:
    return lambda case: case.probe in names


def _padding_only_loss(case: Case) -> bool:
    """A loss case whose targets are all padding (its expected loss is 0 whatever the logits)."""
    inputs = case.make_inputs(case.seed)
    return case.probe == "loss" and bool((inputs["target"] == inputs["pad_id"]).all())


PLANTED = [  # chapter, what is planted, the property cases it must lose
    ("02", {"attention.scaled_dot_product_attention": constant_attention}, _probe("untouched")),
    ("04", {"positional.PositionalEncoding": AlwaysRaises}, _probe("too_long")),
    ("04", {"positional.PositionalEncoding": DroppedOnes}, _probe("dropout")),
    ("06", {"transformer.Transformer": ZeroLogits}, _probe("future")),
    ("07", {"seq2seq.LabelSmoothingLoss": ZeroLoss}, _padding_only_loss),
    ("08", {"classifier.TransformerClassifier": ConstantClassifier},
     _probe("attention_ignores_padding", "padding_invariance")),
]


def scores(chapter: str, impl: PatchedImpl, wanted: Callable[[Case], bool]) -> dict[str, float]:
    """{case name: points earned} of the chapter's cases, public and hidden, that ``wanted`` picks, judged
    the grader's way: inputs made under seed 0, expected values from the reference."""
    spec = chapters.load_spec(chapter)
    out = {}
    for case in [*spec.CASES, *hidden_cases(chapter)]:
        if case.reads_source or not wanted(case):
            continue
        torch.manual_seed(0)
        inputs = case.make_inputs(case.seed)
        expected = run_probe(spec.PROBES, case, REF, inputs)
        actual = run_probe(spec.PROBES, case, impl, inputs)
        out[case.name] = judge(chapter, case, actual, inputs, expected, {}, spec.MISTAKES).earned
    return out


@pytest.mark.parametrize("chapter,overrides,wanted", PLANTED, ids=[f"ch{p[0]}-{i}" for i, p in enumerate(PLANTED)])
def test_code_that_computes_nothing_earns_no_property_case(chapter: str, overrides: dict, wanted) -> None:
    got = scores(chapter, PatchedImpl(REF, overrides, label="constant"), wanted)
    assert got and (chapter == "02" or len(got) >= 2), f"a public and a hidden case at least: {got}"
    assert all(v == 0 for v in got.values()), got
    reference = scores(chapter, REF, wanted)
    assert all(reference[name] > 0 for name in got), reference  # the cases themselves are passable


def test_a_hint_follows_only_the_failure_it_explains() -> None:
    """Issue 18: the in-place hint is not printed for an output that ignores the query (inputs untouched); the
    pe-buffer hint not for a wrong table in a buffer; the NaN hint of an empty row not for finite wrong values."""
    from course_ref import classifier, positional

    def hint_shown(chapter: str, overrides: dict, case: str) -> bool:
        (result,) = chapters.run_chapter(chapter, PatchedImpl(REF, overrides), cases=[case])
        hint = next(c for c in chapters.load_spec(chapter).CASES if c.name == case).hint
        assert result.status == "fail" and hint, result
        return hint in result.message

    assert not hint_shown("02", {"attention.scaled_dot_product_attention": constant_attention},
                          "inputs not modified in place")

    class Shifted(positional.PositionalEncoding):  # a buffer, with a wrong table
        def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
            super().__init__(d_model, dropout, max_len)
            self.pe = self.pe + 1.0

    assert not hint_shown("04", {"positional.PositionalEncoding": Shifted}, "pe is a buffer, not a parameter")

    def plain_mean(x, mask):  # finite, wrong: padding averaged in
        return x.mean(dim=1)

    assert not hint_shown("08", {"classifier.masked_mean": plain_mean,
                                 "classifier.TransformerClassifier": classifier.TransformerClassifier},
                          "masked_mean: a row of padding only gives zeros")

    def nan_mean(x, mask):  # 0 / 0 on the empty row
        keep = mask.unsqueeze(-1)
        return x.masked_fill(~keep, 0.0).sum(1) / keep.sum(1).to(x.dtype)

    assert hint_shown("08", {"classifier.masked_mean": nan_mean}, "masked_mean: a row of padding only gives zeros")
