"""Public twins (issue 26, section 4): wrong code that real learners wrote kept every public point and lost only
hidden ones, so `course check` told them nothing. Each such mistake now has a public case of its own: planted
(solutions/mistakes/chNN.py), it fails that case, by name and with its own message, and loses no other public
point; the reference passes the case.

* chapter 08: a classifier that takes padding as ``tokens != 0`` whatever ``pad_id`` it was built with
  (``pad_id_ignored``), against a batch padded with pad_id 3;
* chapters 05 and 06: residual dropout left out of a Pre-LN layer (all of it, or the FFN's / the
  cross-attention's alone), against a seeded training pass of a norm_first=True layer;
* chapter 03: ``attn_weights`` kept with its autograd graph (``weights_not_detached``), against a case that reads
  whether the weights kept have a graph.
"""
from __future__ import annotations

import pytest

from course_lib.provided import chapters
from course_lib.provided.checking import total
from course_lib.provided.loader import load_impl

from course_admin.release.variants import wrong_impls

PRE_LN_ENCODER = "encoder layer dropout, Pre-LN, training mode only"
PRE_LN_DECODER = "decoder layer dropout, Pre-LN, training mode only"
TWINS = [
    ("08", "pad_id_ignored", "logits of a batch padded with pad_id 3"),
    ("05", "pre_ln_sublayer_dropout_missing", PRE_LN_ENCODER),
    ("05", "pre_ln_ffn_sublayer_dropout_missing", PRE_LN_ENCODER),
    ("06", "decoder_pre_ln_dropout_missing", PRE_LN_DECODER),
    ("06", "decoder_pre_ln_cross_dropout_missing", PRE_LN_DECODER),
    ("03", "weights_not_detached", "attention weights kept without their graph"),
]


@pytest.mark.parametrize("chapter,mistake,case", TWINS)
def test_a_public_case_fails_the_twin_by_name(chapter: str, mistake: str, case: str) -> None:
    spec = chapters.load_spec(chapter)
    assert case in {c.name for c in spec.CASES}, f"{case!r} is not a public case of chapter {chapter}"
    results = {r.case: r for r in chapters.run_chapter(chapter, wrong_impls(chapter)[mistake])}
    failed = [name for name, r in results.items() if r.status != "pass"]
    assert failed == [case], f"{mistake} fails {failed}, expected exactly the public twin case {case!r}"
    result = results[case]
    assert result.mistakes == [mistake], result.mistakes
    assert spec.MISTAKES[mistake] in result.message, result.message
    earned, possible = total(list(results.values()))
    assert earned == possible - result.points


@pytest.mark.parametrize("chapter,case", sorted({(ch, case) for ch, _, case in TWINS}))
def test_the_reference_passes_the_twin_case(chapter: str, case: str) -> None:
    [result] = chapters.run_chapter(chapter, load_impl("reference"), cases=[case])
    assert result.status == "pass", result.message
