"""Known-wrong variants of chapter 04, keyed like MISTAKES in tests/specs/ch04.py.

Each is the reference with one mistake planted. A variant replaces every name the mistake reaches: a
wrong table also replaces PositionalEncoding (the reference's class calls the reference's table).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from course_ref import positional as ref


def table(swap: bool = False, exponent_i: bool = False, halves: bool = False) -> Callable[[int, int], Tensor]:
    """A sinusoidal_table with sin and cos swapped, with the exponent i / d_model instead of 2i / d_model, or
    with the sines in the first half of the columns and the cosines in the second."""
    def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
        position = torch.arange(max_len, dtype=torch.float64)[:, None]      # (max_len, 1)
        i = torch.arange(d_model // 2, dtype=torch.float64)                 # (d_model/2,) the pair index
        exponent = i / d_model if exponent_i else 2 * i / d_model
        angle = position / 10000.0 ** exponent                              # (max_len, d_model/2)
        first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
        out = torch.empty(max_len, d_model, dtype=torch.float64)
        if halves:
            out = torch.cat([first(angle), second(angle)], dim=-1)          # (max_len, d_model) [sin | cos]
        else:
            out[:, 0::2], out[:, 1::2] = first(angle), second(angle)
        return out.float()
    return sinusoidal_table


def encoding(make_table: Callable[[int, int], Tensor] = ref.sinusoidal_table, parameter: bool = False,
             concatenate: bool = False, use_dropout: bool = True, drop_x_only: bool = False) -> type:
    """A PositionalEncoding class with the given mistakes."""
    class Wrong(ref.PositionalEncoding):
        def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
            super().__init__(d_model, dropout, max_len)
            pe = make_table(max_len, d_model).unsqueeze(0)                   # (1, max_len, d_model)
            del self.pe
            if parameter:
                self.pe = nn.Parameter(pe)
            else:
                self.register_buffer("pe", pe)

        def forward(self, x: Tensor) -> Tensor:
            seq = x.size(1)
            if seq > self.max_len:
                raise ValueError(f"sequence length {seq} is longer than max_len {self.max_len}")
            pe = self.pe[:, :seq].to(x.dtype)                                # (1, seq, d_model)
            if concatenate:
                x = torch.cat([x, pe.expand(x.size(0), -1, -1)], dim=-1)     # (batch, seq, 2 d_model)
            elif drop_x_only:
                return self.dropout(x) + pe                                  # (batch, seq, d_model)
            else:
                x = x + pe                                                   # (batch, seq, d_model)
            return self.dropout(x) if use_dropout else x
    return Wrong


class Unscaled(ref.TokenEmbedding):
    """The seed's classifier: the embeddings are not multiplied by √d_model."""

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens)


_table, _pe, _emb = "positional.sinusoidal_table", "positional.PositionalEncoding", "positional.TokenEmbedding"
_swapped, _exp_i, _halves = table(swap=True), table(exponent_i=True), table(halves=True)
VARIANTS: dict[str, dict[str, Callable]] = {
    "sin_cos_swapped": {_table: _swapped, _pe: encoding(_swapped)},
    "exponent_i": {_table: _exp_i, _pe: encoding(_exp_i)},
    "no_sqrt_scale": {_emb: Unscaled},
    "concatenated": {_pe: encoding(concatenate=True)},
    "pe_parameter": {_pe: encoding(parameter=True)},
    "no_dropout": {_pe: encoding(use_dropout=False)},
    "sin_cos_halves": {_table: _halves, _pe: encoding(_halves)},
    "dropout_before_adding": {_pe: encoding(drop_x_only=True)},
}
