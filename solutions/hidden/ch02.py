"""Hidden cases of chapter 02: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("02")
plain, with_padding, with_causal, with_empty_rows, with_mask = (_spec.plain, _spec.with_padding, _spec.with_causal,
                                                                 _spec.with_empty_rows, _spec.with_mask)

CASES = [
    Case("h-plain-long", 1.0, "forward", lambda s: plain(s, lead=(3,), seq_q=9, seq_k=11, d_k=32, d_v=5), seed=9301,
         about="no mask, with more keys than queries"),
    Case("h-heads-wide", 1.0, "forward", lambda s: plain(s, lead=(2, 4), seq_q=7, seq_k=3, d_k=24, d_v=12), seed=9302,
         about="no mask, with heads and fewer keys than queries"),
    Case("h-padding", 1.0, "forward", lambda s: with_padding(s, batch=5, heads=3, seq=9, d_k=16, d_v=8), seed=9303,
         about="a padding mask broadcast over heads and queries"),
    Case("h-causal", 1.0, "forward", lambda s: with_causal(s, batch=3, heads=2, seq=8, d_k=32, d_v=4), seed=9304,
         about="a causal mask broadcast over batch and heads"),
    Case("h-empty-rows", 1.0, "forward", lambda s: with_empty_rows(s, batch=2, seq_q=6, seq_k=7, d_k=16, d_v=3),
         seed=9305, about="fully masked query rows stay finite", ignore=_spec.fully_masked_rows),
    Case("h-float64-heads", 1.0, "forward",
         lambda s: plain(s, lead=(2, 2), seq_q=5, seq_k=5, d_k=40, d_v=6, dtype=torch.float64), seed=9306,
         about="float64 end to end, with heads",
         rtol=1e-7, atol=1e-9),
    Case("h-gradients-causal", 1.0, "gradients", lambda s: with_causal(s, batch=2, heads=2, seq=6, d_k=16, d_v=8),
         seed=9307, about="gradients to query, key and value under a causal mask"),
    Case("h-mask-keys", 1.0, "forward", lambda s: with_mask(s, "keys", batch=3, heads=2, seq_q=5, seq_k=9, d_k=16, d_v=3),
         seed=9308, about="a mask over the keys only, broadcast over the other axes"),
    Case("h-mask-queries", 1.0, "forward",
         lambda s: with_mask(s, "queries", batch=2, heads=4, seq_q=6, seq_k=5, d_k=8, d_v=7), seed=9309,
         about="a mask per sequence, shared by the heads"),
    Case("h-mask-heads", 1.0, "forward", lambda s: with_mask(s, "heads", batch=3, heads=2, seq_q=7, seq_k=7, d_k=24, d_v=4),
         seed=9310, about="a mask per head"),
    Case("h-float16-empty-rows", 1.0, "forward",
         lambda s: with_empty_rows(s, batch=2, seq_q=5, seq_k=6, d_k=16, d_v=4, dtype=torch.float16), seed=9311,
         about="float16 with fully masked query rows",
         ignore=_spec.fully_masked_rows, **_spec.HALF),
    Case("h-bfloat16-padding", 1.0, "forward",
         lambda s: with_padding(s, batch=4, heads=2, seq=7, d_k=16, d_v=6, dtype=torch.bfloat16), seed=9312,
         about="bfloat16 with a padding mask",
         **_spec.BFLOAT),
    Case("h-square-heads", 1.0, "forward", lambda s: plain(s, lead=(3, 3), seq_q=5, seq_k=3, d_k=3, d_v=2), seed=9313,
         about="square shapes, where transposing the wrong axes still runs"),
    # every shape the docstring promises: "..." is any number of leading axes, none included; any seq_q, 1 included
    Case("h-no-leading-axes", 1.0, "forward", lambda s: plain(s, lead=(), seq_q=4, seq_k=6, d_k=8, d_v=5), seed=9314,
         about="inputs with no leading axes"),
    Case("h-one-query", 1.0, "forward",
         lambda s: with_mask(s, "queries", batch=2, heads=3, seq_q=1, seq_k=7, d_k=16, d_v=4), seed=9315,
         about="a single query, with a mask shared by the heads"),
    Case("h-three-leading-axes", 1.0, "forward",
         lambda s: plain(s, lead=(2, 2, 3), seq_q=3, seq_k=5, d_k=8, d_v=4), seed=9316,
         about="inputs with three leading axes"),
    # dropout on the attention weights (last, so that the planted score vectors keep their positions)
    Case("h-dropout-rate-0.6", 1.0, "dropout", lambda s: _spec.with_dropout(s, p=0.6, lead=(2, 3), seq=12, d_k=16),
         seed=9317, about="dropout on the attention weights at another rate", **_spec.DROPOUT),
]
