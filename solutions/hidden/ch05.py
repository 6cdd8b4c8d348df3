"""Hidden cases of chapter 05: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("05")
norm_inputs, ffn_inputs, layer_inputs = _spec.norm_inputs, _spec.ffn_inputs, _spec.layer_inputs

CASES = [
    Case("h-norm-4d", 1.0, "norm", lambda s: norm_inputs(s, shape=(2, 3, 4, 20), shift=-5.0, scale=4.0), seed=9501,
         about="LayerNorm on a 4-D input far from 0"),
    Case("h-norm-eps", 1.0, "norm", lambda s: norm_inputs(s, shape=(5, 3), eps=0.5, scale=0.5), seed=9502,
         about="LayerNorm with a larger eps"),
    Case("h-ffn-wide", 1.0, "ffn", lambda s: ffn_inputs(s, batch=3, seq=7, d_model=16, d_ff=64), seed=9503,
         about="feed-forward values with a wider hidden layer"),
    Case("h-post-ln-8-heads", 1.0, "forward",
         lambda s: layer_inputs(s, batch=2, seq=9, d_model=32, heads=8, d_ff=64, mask=True), seed=9504,
         about="a Post-LN layer with more heads and a padding mask"),
    Case("h-pre-ln-one-head", 1.0, "forward",
         lambda s: layer_inputs(s, batch=3, seq=5, d_model=8, heads=1, d_ff=16, norm_first=True), seed=9505,
         about="a Pre-LN layer with a single head"),
    Case("h-post-ln-stack-4", 1.0, "forward",
         lambda s: layer_inputs(s, batch=4, seq=7, d_model=16, heads=4, d_ff=32, layers=4, mask=True), seed=9506,
         about="a deeper Post-LN encoder with a padding mask"),
    Case("h-pre-ln-stack-3", 1.0, "forward",
         lambda s: layer_inputs(s, batch=2, seq=8, d_model=16, heads=2, d_ff=48, layers=3, norm_first=True,
                                mask=True), seed=9507,
         about="a Pre-LN encoder and its final norm, with a padding mask"),
    Case("h-gradients-pre-ln-stack", 1.0, "gradients",
         lambda s: layer_inputs(s, batch=2, seq=5, d_model=12, heads=3, layers=2, norm_first=True, mask=True),
         seed=9508, about="gradients through a Pre-LN encoder with a padding mask"),
    Case("h-float64-post-ln-stack", 1.0, "forward",
         lambda s: layer_inputs(s, batch=3, seq=4, d_model=12, heads=4, layers=2, mask=True, dtype=torch.float64),
         seed=9509, rtol=1e-7, atol=1e-9,
         about="float64 end to end, a Post-LN stack"),
    # every shape the docstrings promise: LayerNorm and the FFN take any leading axes, none included; an
    # EncoderLayer takes any mask broadcastable to (batch, heads, seq, seq)
    Case("h-norm-one-vector", 1.0, "norm", lambda s: norm_inputs(s, shape=(16,), shift=3.0, scale=2.0), seed=9510,
         about="LayerNorm on a single vector, with no leading axes"),
    Case("h-ffn-tokens", 1.0, "ffn", lambda s: ffn_inputs(s, d_model=12, d_ff=20, lead=(7,)), seed=9511,
         about="the feed-forward network on a single leading axis"),
    Case("h-ffn-4d", 1.0, "ffn", lambda s: ffn_inputs(s, d_model=8, d_ff=16, lead=(2, 3, 4)), seed=9512,
         about="the feed-forward network on three leading axes"),
    Case("h-post-ln-causal-mask", 1.0, "forward",
         lambda s: layer_inputs(s, batch=3, seq=6, d_model=16, heads=4, d_ff=32, mask="causal"), seed=9513,
         about="a Post-LN layer with a padding and causal mask"),
    # dropout in training mode (the attentions' own silenced: chapter 03 judges it), and the defaults
    Case("h-training-pre-ln", 1.0, "training",
         lambda s: {**layer_inputs(s, batch=2, seq=7, d_model=16, heads=4, norm_first=True, mask=True),
                    "dropout": torch.tensor(0.5)}, seed=9514, about="dropout in a Pre-LN layer, training mode only"),
    Case("h-training-stack", 1.0, "training",
         lambda s: {**layer_inputs(s, batch=2, seq=5, layers=2, mask=True), "dropout": torch.tensor(0.2)},
         seed=9515, about="dropout in every layer of a Post-LN encoder, training mode only"),
    Case("h-training-ffn-4d", 1.0, "training",
         lambda s: {**ffn_inputs(s, d_ff=32, lead=(2, 3, 4)), "dropout": torch.tensor(0.6)}, seed=9516,
         about="the feed-forward network's dropout on any leading axes"),
    Case("h-defaults", 1.0, "defaults", lambda s: layer_inputs(s, d_model=16, heads=2, d_ff=40), seed=9517,
         about="the modules' defaults"),
]
