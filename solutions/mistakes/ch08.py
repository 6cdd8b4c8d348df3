"""Known-wrong variants of chapter 08, keyed like MISTAKES in tests/specs/ch08.py.

Each is the reference with one mistake planted: a wrong masked_mean is also the pooling of that
variant's TransformerClassifier, so that every case sees the mistake where a learner's code would carry
it. The variants use the reference's chapters 04 and 05. Seed 000's whole classifier, which carries
several of these mistakes at once, is solutions/tests/checks/test_ch08_seed000.py.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from course_ref import classifier as ref
from course_ref import encoder as ref_encoder


def plain_mean(x: Tensor, mask: Tensor) -> Tensor:
    """The mean over every position, padding included (what nn.AdaptiveAvgPool1d(1) computes)."""
    return x.mean(dim=1)  # (batch, d_model)


def mean_over_features(x: Tensor, mask: Tensor) -> Tensor:
    """The masked sum taken over the features instead of the positions: (batch, seq)."""
    keep = mask.unsqueeze(-1)  # (batch, seq, 1)
    return x.masked_fill(~keep, 0.0).sum(dim=-1) / mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype)


def over_full_length(x: Tensor, mask: Tensor) -> Tensor:
    """The masked sum divided by the full length seq, padding counted in the denominator."""
    return x.masked_fill(~mask.unsqueeze(-1), 0.0).sum(dim=1) / x.size(1)  # (batch, d_model)


def first_token(x: Tensor, mask: Tensor) -> Tensor:
    return x[:, 0]  # (batch, d_model): the first position's hidden state


class PreLNLayer(ref_encoder.EncoderLayer):
    """Pre-LN whatever norm_first says (seed 000's layer)."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        h = self.norm1(x)
        x = x + self.dropout(self.self_attn(h, h, h, mask=mask))
        return x + self.dropout(self.ffn(self.norm2(x)))


class PreLNEncoder(ref_encoder.Encoder):
    """Pre-LN layers and no final norm, whatever norm_first says."""

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False) -> None:
        super().__init__(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
        self.layers = torch.nn.ModuleList(PreLNLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask=mask)
        return x


def classifier_class(pool: Callable[[Tensor, Tensor], Tensor] = ref.masked_mean, pass_mask: bool = True,
                     scale: bool = True, use_mask_argument: bool = True, pre_ln: bool = False,
                     padding_id: int | None = None) -> type:
    """A TransformerClassifier with the given mistakes; ``padding_id`` a constant that marks padding whatever
    pad_id the model is built with (None: its pad_id)."""
    class WrongClassifier(ref.TransformerClassifier):
        def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                     num_classes: int = 2, dropout: float = 0.1, max_len: int = 512, pad_id: int = 0,
                     norm_first: bool = False) -> None:
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, num_classes, dropout, max_len, pad_id,
                             norm_first)
            if pre_ln:
                self.encoder = PreLNEncoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first)

        def padding(self, tokens: Tensor) -> Tensor:
            return tokens != (self.pad_id if padding_id is None else padding_id)  # (batch, seq)

        def encode(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
            if mask is None:
                mask = self.padding(tokens)
            embedded = self.embed(tokens) if scale else self.embed.embedding(tokens)  # the latter unscaled
            x = self.positional(embedded)
            return self.encoder(x, mask=mask[:, None, None, :] if pass_mask else None)

        def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
            if mask is None or not use_mask_argument:
                mask = self.padding(tokens)
            return self.head(pool(self.encode(tokens, mask), mask))
    return WrongClassifier


def variant(pool: Callable[[Tensor, Tensor], Tensor] = ref.masked_mean, **model: bool) -> dict[str, Callable]:
    out: dict[str, Callable] = {"classifier.TransformerClassifier": classifier_class(pool, **model)}
    if pool is not ref.masked_mean:
        out["classifier.masked_mean"] = pool
    return out


VARIANTS: dict[str, dict[str, Callable]] = {
    "padding_in_pool": variant(pool=plain_mean),
    "no_padding_mask": variant(pass_mask=False),
    "pool_wrong_axis": variant(pool=mean_over_features),
    "no_sqrt_scale": variant(scale=False),
    "mean_over_full_length": variant(pool=over_full_length),
    "first_token_pooling": variant(pool=first_token),
    "mask_argument_ignored": variant(use_mask_argument=False),
    "pre_ln_without_final_norm": variant(pre_ln=True),
    "pad_id_ignored": variant(padding_id=0),
}
