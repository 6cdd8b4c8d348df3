"""Hidden cases of chapter 07: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("07")
shift_inputs, loss_inputs, schedule_inputs = _spec.shift_inputs, _spec.loss_inputs, _spec.schedule_inputs
successor_inputs, model_inputs, label_inputs = _spec.successor_inputs, _spec.model_inputs, _spec.label_inputs

CASES = [
    Case("h-shift-long-pad-5", 1.0, "shift", lambda s: shift_inputs(s, batch=5, seq=9, vocab=14, bos=2, eos=3, pad=5),
         seed=9701, about="shift_right with other BOS and pad ids", ignore=_spec.padded_labels),
    Case("h-distribution-smoothing-0.3", 1.0, "distribution",
         lambda s: loss_inputs(s, batch=4, seq=5, vocab=6, pad=2, smoothing=0.3), seed=9702,
         about="the target distribution with another smoothing and pad id"),
    Case("h-loss-large-vocab", 1.0, "loss", lambda s: loss_inputs(s, batch=4, seq=7, vocab=40, padding_rows=1),
         seed=9703, about="the loss and its gradient, a larger vocabulary and an all-padding row"),
    Case("h-loss-all-padding-float64", 1.0, "loss",
         lambda s: loss_inputs(s, batch=3, padding_rows=3, dtype=torch.float64), seed=9704, rtol=1e-7, atol=1e-9,
         about="float64 end to end, a batch of padding only"),
    Case("h-schedule-small-model", 1.0, "schedule",
         lambda s: schedule_inputs(s, d_model=128, warmup=50, steps=(0, 10, 48, 49, 50, 51, 500, 5000)), seed=9705,
         about="noam_schedule at other settings, around the end of warmup",
         rtol=1e-6, atol=1e-12),
    Case("h-harness-warmup-3", 1.0, "harness", lambda s: schedule_inputs(s, d_model=16, warmup=3, steps=(0, 12)),
         seed=9706, about="noam_schedule as the harness uses it, with a short warmup", rtol=1e-6, atol=1e-12),
    Case("h-successor-first-token-eos", 1.0, "successor",
         lambda s: successor_inputs(s, batch=5, vocab=15, lengths=(1, 7, 2, 5, 3), max_len=12), seed=9707,
         about="greedy_decode when a sequence ends at its first token"),
    Case("h-successor-max-len-cuts", 1.0, "successor",
         lambda s: successor_inputs(s, batch=3, vocab=10, lengths=(6, 2, 0), max_len=4), seed=9708,
         about="greedy_decode cut at max_len before an EOS"),
    Case("h-transformer-pre-ln-decode", 1.0, "transformer",
         lambda s: model_inputs(s, batch=4, src_seq=5, vocab=9, max_len=8, norm_first=True), seed=9709,
         about="greedy_decode with a Pre-LN Transformer"),
    Case("h-teacher-forcing-longer", 1.0, "teacher",
         lambda s: model_inputs(s, batch=4, src_seq=6, tgt_seq=9, vocab=11), seed=9710,
         about="the teacher forcing loss on a longer target"),
    # every shape the docstring promises: target_distribution takes labels of any shape (...), not only (batch, seq)
    Case("h-distribution-flat-labels", 1.0, "distribution", lambda s: label_inputs(s, (24,), pad=3), seed=9711,
         about="the target distribution of labels with a single axis"),
    Case("h-distribution-3d-labels", 1.0, "distribution", lambda s: label_inputs(s, (2, 2, 6), vocab=7), seed=9712,
         about="the target distribution of labels with three axes"),
    Case("h-loss-one-label-float64", 1.0, "loss",
         lambda s: loss_inputs(s, batch=3, seq=1, padding_rows=2, dtype=torch.float64), seed=9713,
         rtol=1e-7, atol=1e-9, about="a batch with a single real label, in float64"),
    Case("h-defaults", 1.0, "defaults", lambda s: loss_inputs(s, batch=2, seq=5, vocab=17, pad=3), seed=9714,
         rtol=1e-6, atol=1e-9, about="the loss's default smoothing and the schedule's default warmup"),
]
