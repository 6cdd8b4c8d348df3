"""Hidden cases of chapter 03: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("03")
tensor, attention_inputs = _spec.tensor, _spec.attention_inputs

CASES = [
    Case("h-split-wide", 1.0, "split", lambda s: tensor(s, batch=3, seq=7, d_model=24, heads=6), seed=9401,
         about="split_heads at another width and number of heads"),
    Case("h-merge-one-head", 1.0, "merge", lambda s: tensor(s, batch=2, seq=4, d_model=10, heads=1, split=True),
         seed=9402, about="merge_heads of a single head"),
    Case("h-self-8-heads", 1.0, "forward", lambda s: attention_inputs(s, batch=3, seq_q=9, d_model=32, heads=8),
         seed=9403, about="self-attention with more heads, no mask"),
    Case("h-cross-long-memory", 1.0, "forward",
         lambda s: attention_inputs(s, batch=2, seq_q=3, seq_k=11, d_model=16, heads=4), seed=9404,
         about="cross-attention to a longer memory"),
    Case("h-padding-cross", 1.0, "forward",
         lambda s: attention_inputs(s, batch=4, seq_q=5, seq_k=8, d_model=16, heads=4, mask="padding"), seed=9405,
         about="cross-attention with a padding mask"),
    Case("h-causal-one-head", 1.0, "forward",
         lambda s: attention_inputs(s, batch=2, seq_q=7, d_model=12, heads=1, mask="causal"), seed=9406,
         about="a causal mask with a single head"),
    Case("h-weights-causal", 1.0, "weights",
         lambda s: attention_inputs(s, batch=2, seq_q=6, d_model=16, heads=4, mask="causal"), seed=9407,
         about="the attention weights kept, under a causal mask"),
    Case("h-gradients-padding", 1.0, "gradients",
         lambda s: attention_inputs(s, batch=3, seq_q=5, seq_k=6, d_model=12, heads=3, mask="padding"), seed=9408,
         about="gradients to inputs and parameters, cross-attention with a padding mask"),
    Case("h-float64-padding", 1.0, "forward",
         lambda s: attention_inputs(s, batch=2, seq_q=4, d_model=20, heads=5, mask="padding", dtype=torch.float64),
         seed=9409, rtol=1e-7, atol=1e-9,
         about="float64 end to end, with a padding mask"),
    # every shape the docstring promises: any seq_q, a single query included (a decoding step's cross-attention),
    # and every mask broadcastable to (batch, heads, seq_q, seq_k), beyond the public two
    Case("h-cross-one-query", 1.0, "forward",
         lambda s: attention_inputs(s, batch=3, seq_q=1, seq_k=6, d_model=12, heads=3, mask="padding"), seed=9412,
         about="cross-attention from a single query"),
    Case("h-mask-per-query", 1.0, "forward",
         lambda s: attention_inputs(s, batch=3, seq_q=6, d_model=16, heads=4, mask="target"), seed=9410,
         about="a padding and causal mask per sequence, shared by the heads"),
    Case("h-mask-per-head", 1.0, "forward",
         lambda s: attention_inputs(s, batch=2, seq_q=4, seq_k=6, d_model=12, heads=3, mask="heads"), seed=9411,
         about="a mask per head"),
    # dropout: another rate, and cross-attention; the check that d_model is divisible
    Case("h-dropout-cross", 1.0, "dropout", lambda s: _spec.with_dropout(s, p=0.5, batch=3, seq_q=10, seq_k=14,
                                                                        d_model=24, heads=6),
         seed=9413, about="attention dropout in training mode only, cross-attention", **_spec.DROPOUT),
    Case("h-indivisible", 1.0, "indivisible",
         lambda s: {**attention_inputs(s, d_model=16, heads=4), "bad_heads": torch.tensor(6)}, seed=9414,
         about="a ValueError when d_model is not divisible by num_heads"),
]
