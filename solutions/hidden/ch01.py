"""Hidden cases of chapter 01: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("01")
step, sequence, linear, GRAD = _spec.step, _spec.sequence, _spec.linear, _spec.GRAD

CASES = [
    Case("h-step-wide-input", 1.0, "step", lambda s: step(s, batch=5, input_size=9, hidden_size=4), seed=9101,
         about="rnn_step with an input wider than the state"),
    Case("h-step-one-row", 1.0, "step", lambda s: step(s, batch=1, input_size=2, hidden_size=7), seed=9102,
         about="rnn_step on a batch of one"),
    Case("h-forward-batch-4", 1.0, "forward", lambda s: sequence(s, batch=4, seq=9, input_size=5, hidden_size=3),
         seed=9103, about="outputs and last state, with a state narrower than the input"),
    Case("h-forward-one-position", 1.0, "forward", lambda s: sequence(s, seq=1, input_size=3, hidden_size=4,
                                                                       h0=True), seed=9104,
         about="a sequence of a single position, with an initial state"),
    Case("h-forward-square-h0", 1.0, "forward", lambda s: sequence(s, batch=3, seq=7, input_size=6, hidden_size=6,
                                                                    h0=True), seed=9105,
         about="input_size equal to hidden_size, with an initial state"),
    Case("h-forward-float64-h0", 1.0, "forward",
         lambda s: sequence(s, seq=8, input_size=2, hidden_size=5, h0=True, dtype=torch.float64), seed=9106,
         rtol=1e-7, atol=1e-9, about="float64 end to end, with an initial state"),
    Case("h-gradients-long", 1.0, "gradients", lambda s: sequence(s, batch=3, seq=10, input_size=4, hidden_size=2,
                                                                   h0=True), seed=9107,
         about="gradients to x, h0 and every parameter over a longer sequence"),
    Case("h-norms-linear-slow", 1.0, "norms_linear", lambda s: linear(s, batch=3, seq=12, input_size=2,
                                                                       hidden_size=5, decay=0.95), seed=9108,
         about="gradient_norms of a slowly decaying linear recurrence", **GRAD),
    Case("h-norms-rnn-long", 1.0, "norms", lambda s: sequence(s, batch=2, seq=20, input_size=4, hidden_size=7),
         seed=9109, about="gradient_norms of your RNN over a long sequence", **GRAD),
    Case("h-norms-quietly-float64", 1.0, "norms_quietly",
         lambda s: sequence(s, batch=3, seq=5, input_size=2, hidden_size=3, dtype=torch.float64), seed=9110,
         rtol=1e-7, atol=1e-9, about="gradient_norms under torch.no_grad() in float64"),
    Case("h-initial-weights-wide", 1.0, "init", lambda s: {"x": torch.randn(3, 4, 64, generator=torch.Generator().manual_seed(s)),
                                                        "hidden_size": torch.tensor(16)},
         seed=9111, about="the initial weights' range", **_spec.INIT),
]
