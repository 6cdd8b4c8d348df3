"""Hidden cases of chapter 04: the spec's own input makers on other seeds and shapes.

Learners never receive this file; the grader adds these cases after the public ones and reports them
only as "hidden case N" with a redacted message (no inputs, shapes or values).
"""
from __future__ import annotations

import torch

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("04")
table_size, embeddings, tokens = _spec.table_size, _spec.embeddings, _spec.tokens

CASES = [
    Case("h-table-narrow", 1.0, "table", lambda s: table_size(s, max_len=9, d_model=2), seed=9501,
         about="a very narrow sinusoidal_table"),
    Case("h-table-wide", 1.0, "table", lambda s: table_size(s, max_len=64, d_model=128), seed=9502,
         about="a wider sinusoidal_table"),
    Case("h-add-one-position", 1.0, "add", lambda s: embeddings(s, batch=4, seq=1, d_model=6, max_len=5), seed=9503,
         about="x + pe for a sequence of a single position"),
    Case("h-add-long", 1.0, "add", lambda s: embeddings(s, batch=2, seq=40, d_model=32, max_len=64), seed=9504,
         about="x + pe for a long sequence"),
    Case("h-add-float64", 1.0, "add", lambda s: embeddings(s, batch=2, seq=5, d_model=10, max_len=8,
                                                           dtype=torch.float64), seed=9505,
         about="float64 end to end (a float32 table is close enough)"),
    Case("h-buffer-wide", 1.0, "buffer", lambda s: table_size(s, max_len=30, d_model=20), seed=9506,
         about="pe kept as a buffer, not a parameter, at another size"),
    Case("h-dropout-long", 1.0, "dropout", lambda s: embeddings(s, batch=3, seq=20, d_model=12, max_len=25),
         seed=9507, about="dropout on x + pe in training mode only, at another size", **_spec.DROPOUT),
    Case("h-too-long", 1.0, "too_long", lambda s: embeddings(s, batch=1, seq=101, d_model=4, max_len=100),
         seed=9508, about="a ValueError for a sequence longer than max_len"),
    Case("h-embed-wide", 1.0, "embed", lambda s: tokens(s, batch=3, seq=4, vocab_size=50, d_model=64), seed=9509,
         about="TokenEmbedding scaled by √d_model at another width"),
    Case("h-embed-gradient-repeats", 1.0, "embed_gradient",
         lambda s: tokens(s, batch=4, seq=9, vocab_size=5, d_model=8), seed=9510,
         about="TokenEmbedding's gradient when tokens repeat"),
    Case("h-odd-width", 1.0, "odd", lambda s: table_size(s, 7, 4), seed=9511,
         about="a ValueError for an odd d_model"),
    Case("h-defaults-wide", 1.0, "defaults", lambda s: {"d_model": torch.tensor(64), "vocab_size": torch.tensor(300)},
         seed=9512, about="the defaults of PositionalEncoding and TokenEmbedding's initial weights", **_spec.DEFAULTS),
]
