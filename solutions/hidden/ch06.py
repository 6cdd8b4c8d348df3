"""Hidden cases of chapter 06: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("06")
mask_inputs, decoder_inputs, model_inputs, leak_inputs = (_spec.mask_inputs, _spec.decoder_inputs, _spec.model_inputs,
                                                     _spec.leak_inputs)
fully_masked_rows = _spec.fully_masked_rows  # the rows of a target padded at the start: not graded

CASES = [
    Case("h-padding-pad-3", 1.0, "padding", lambda s: mask_inputs(s, batch=4, seq=8, vocab=12, pad_id=3), seed=9601,
         about="padding_mask with another pad_id"),
    Case("h-causal-9", 1.0, "causal", lambda s: mask_inputs(s, seq=9), seed=9602,
         about="causal_mask of another size"),
    Case("h-target-long", 1.0, "target", lambda s: mask_inputs(s, batch=4, seq=9, pad_id=5), seed=9603,
         about="target_mask with another pad_id"),
    Case("h-post-ln-8-heads-masks", 1.0, "decoder",
         lambda s: decoder_inputs(s, batch=2, tgt_seq=7, src_seq=9, d_model=32, heads=8, d_ff=64, tgt_mask="target",
                                  memory_mask=True), seed=9604,
         about="a Post-LN decoder layer with more heads and both masks"),
    Case("h-pre-ln-one-head-causal", 1.0, "decoder",
         lambda s: decoder_inputs(s, batch=3, tgt_seq=4, src_seq=6, d_model=8, heads=1, d_ff=16, norm_first=True),
         seed=9605, about="a Pre-LN decoder layer with a single head and a causal mask"),
    Case("h-equal-lengths-memory-mask", 1.0, "decoder",
         lambda s: decoder_inputs(s, batch=4, tgt_seq=5, src_seq=5, tgt_mask="causal", memory_mask=True), seed=9606,
         about="equal source and target lengths, with a memory_mask"),
    Case("h-pre-ln-stack-3-left-padded", 1.0, "decoder",
         lambda s: decoder_inputs(s, batch=3, tgt_seq=6, src_seq=5, d_model=16, heads=4, layers=3, norm_first=True,
                                  tgt_mask="left", memory_mask=True), seed=9607,
         about="a Pre-LN decoder with a target padded at the start", ignore=fully_masked_rows),
    Case("h-gradients-pre-ln-stack", 1.0, "gradients",
         lambda s: decoder_inputs(s, batch=2, tgt_seq=4, src_seq=6, layers=2, norm_first=True, tgt_mask="target",
                                  memory_mask=True), seed=9608,
         about="gradients through a Pre-LN decoder with both masks"),
    Case("h-transformer-pre-ln-pad-1", 1.0, "model",
         lambda s: model_inputs(s, batch=3, src_seq=6, tgt_seq=8, src_vocab=9, tgt_vocab=7, pad_id=1,
                                norm_first=True), seed=9609, about="Transformer logits, Pre-LN, with another pad_id"),
    Case("h-future-leak-long", 1.0, "future", lambda s: leak_inputs(s, batch=3, src_seq=5, tgt_seq=9, layers=3),
         seed=9610, about="no future leak in a deeper Transformer with a longer target", **_spec.NO_LEAK),
    Case("h-transformer-float64", 1.0, "model", lambda s: model_inputs(s, dtype=torch.float64), seed=9611,
         about="a Transformer in float64 end to end (the positional table's float32 rounding allowed)",
         **_spec.FLOAT64_MODEL),
    # dropout in training mode (the attentions' own silenced: chapter 03 judges it); a layer called without masks
    Case("h-training-pre-ln-stack", 1.0, "training",
         lambda s: {**decoder_inputs(s, batch=2, tgt_seq=5, src_seq=6, layers=2, norm_first=True, tgt_mask="target",
                                     memory_mask=True), "dropout": torch.tensor(0.5)}, seed=9612,
         about="dropout in every layer of a Pre-LN decoder, training mode only"),
    Case("h-no-masks", 1.0, "decoder",
         lambda s: decoder_inputs(s, batch=2, tgt_seq=4, src_seq=5, tgt_mask=None, memory_mask=False), seed=9613,
         about="a decoder layer called with tgt_mask=None and memory_mask=None"),
]
