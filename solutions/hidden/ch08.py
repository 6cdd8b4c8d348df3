"""Hidden cases of chapter 08: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("08")
pool_inputs, model_inputs = _spec.pool_inputs, _spec.model_inputs

CASES = [
    Case("h-pool-long", 1.0, "pool", lambda s: pool_inputs(s, batch=5, seq=11, d_model=12), seed=9801,
         about="masked_mean on a longer padded batch"),
    Case("h-pool-empty-rows-float64", 1.0, "pool",
         lambda s: pool_inputs(s, batch=2, seq=4, d_model=6, empty_row=True, dtype=torch.float64), seed=9802,
         rtol=1e-7, atol=1e-9, about="float64 end to end, a row of padding only"),
    Case("h-no-layers-wide", 1.0, "logits", lambda s: model_inputs(s, d_model=32, layers=0, padded=False, classes=3),
         seed=9803, about="no encoder layers, no padding, more than two classes"),
    Case("h-post-ln-pad-id-3", 1.0, "logits",
         lambda s: model_inputs(s, batch=4, seq=10, vocab_size=20, pad_id=3, layers=3), seed=9804,
         about="logits of a deeper Post-LN model with another pad_id"),
    Case("h-pre-ln-one-head", 1.0, "logits",
         lambda s: model_inputs(s, batch=2, seq=6, d_model=8, heads=1, d_ff=16, norm_first=True), seed=9805,
         about="logits of a Pre-LN model with a single head"),
    Case("h-attention-pre-ln", 1.0, "attention_ignores_padding",
         lambda s: model_inputs(s, batch=3, seq=5, norm_first=True, extra=9), seed=9806,
         about="attention ignores padding, Pre-LN",
         **_spec.ATTENTION_PADDING),
    Case("h-invariance-pad-id-1", 1.0, "padding_invariance",
         lambda s: model_inputs(s, batch=5, seq=6, pad_id=1, extra=3), seed=9807,
         about="more padding changes no logit, with another pad_id", **_spec.LOGITS_PADDING),
    Case("h-empty-row-pre-ln", 1.0, "logits",
         lambda s: model_inputs(s, batch=3, seq=5, norm_first=True, empty_row=True), seed=9808,
         about="a row of padding only stays finite, Pre-LN"),
    Case("h-attention-pad-id-3", 1.0, "attention_ignores_padding",
         lambda s: model_inputs(s, batch=3, seq=6, vocab_size=9, pad_id=3, extra=4), seed=9809,
         about="encode() with its default mask, pad_id 3", **_spec.ATTENTION_PADDING),
    Case("h-explicit-mask-pre-ln", 1.0, "logits",
         lambda s: {**model_inputs(s, batch=4, seq=6, norm_first=True, padded=False), "mask": _spec._keep(4, 6)},
         seed=9810, about="forward with an explicit mask, Pre-LN"),
    Case("h-ends-with-a-norm-pre-ln", 1.0, "encoded", lambda s: model_inputs(s, padded=False, norm_first=True),
         seed=9811, about="a Pre-LN encoder ends with its final norm", **_spec.ENDS_WITH_A_NORM),
    Case("h-defaults", 1.0, "defaults", lambda s: {"seed": torch.tensor(s)}, seed=9812,
         about="the classifier's defaults"),
]
