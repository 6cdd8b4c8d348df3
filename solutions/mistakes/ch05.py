"""Known-wrong variants of chapter 05, keyed like MISTAKES in tests/specs/ch05.py.

Each is the reference with one mistake planted. A variant of LayerNorm or of the feed-forward network is
also used by the EncoderLayer and Encoder of that variant, and a wrong EncoderLayer by its Encoder, so
that every case sees the mistake where a learner's code would carry it. The variants call the
reference's chapter 03 MultiHeadAttention.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from course_ref import encoder as ref

PRE, POST = "pre", "post"


def norm_class(dim: int = -1, unbiased: bool = False, eps_outside: bool = False, fixed_eps: float | None = None) -> type:
    """A LayerNorm over axis ``dim``, with the unbiased variance when ``unbiased``, eps outside the root, or a
    constant ``fixed_eps`` whatever eps it was built with."""
    class WrongNorm(ref.LayerNorm):
        def forward(self, x: Tensor) -> Tensor:
            mean = x.mean(dim=dim, keepdim=True)
            var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
            eps = self.eps if fixed_eps is None else fixed_eps
            scale = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
            return (x - mean) / scale * self.weight + self.bias
    return WrongNorm


class FFNNoReLU(ref.PositionwiseFeedForward):
    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.linear1(x)))


class FFNGELU(ref.PositionwiseFeedForward):
    """GELU (BERT's, GPT's) in place of the paper's ReLU."""

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(torch.nn.functional.gelu(self.linear1(x))))


class FFNDropsOutput(ref.PositionwiseFeedForward):
    """Dropout after linear2 instead of on the hidden units."""

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.linear2(torch.relu(self.linear1(x))))


def layer_class(norm: type = ref.LayerNorm, ffn: type = ref.PositionwiseFeedForward, post: str = POST,
                pre: str = PRE, pass_mask: bool = True, drop: str = "sublayers", attn_dropout: bool = True,
                pre_drop: str | None = None) -> type:
    """An EncoderLayer with the given parts; ``post`` is what norm_first=False computes, ``pre`` what
    norm_first=True computes: "post", "pre", or the wrong orders "post_norm_then_add" (x + norm(f(x)))
    and "pre_from_normed" (h = norm(x); h + f(h)). ``drop``: "sublayers" (right), "none", "attention_only" or
    "residual" (the dropout on x + f(x)), and ``pre_drop`` the same for norm_first=True alone (None: as ``drop``);
    ``attn_dropout`` False builds the attention without dropout."""
    drop_ = drop

    class WrongLayer(ref.EncoderLayer):
        def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                     norm_first: bool = False) -> None:
            super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
            self.ffn = ffn(d_model, d_ff, dropout)
            self.norm1, self.norm2 = norm(d_model), norm(d_model)
            if not attn_dropout:
                self.self_attn = ref.MultiHeadAttention(d_model, num_heads)

        def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
            mask = mask if pass_mask else None
            keep = lambda y: y  # noqa: E731
            drop = drop_ if pre_drop is None or not self.norm_first else pre_drop
            outer = self.dropout if drop in ("sublayers", "attention_only") else keep
            attn = lambda h: outer(self.self_attn(h, h, h, mask=mask))  # noqa: E731
            ffn_ = lambda h: (self.dropout if drop == "sublayers" else keep)(self.ffn(h))  # noqa: E731
            around = self.dropout if drop == "residual" else keep
            form = pre if self.norm_first else post
            for f, n in ((attn, self.norm1), (ffn_, self.norm2)):
                if form == POST:
                    x = n(around(x + f(x)))
                elif form == PRE:
                    x = around(x + f(n(x)))
                elif form == "post_norm_then_add":
                    x = x + n(f(x))
                else:  # "pre_from_normed"
                    h = n(x)
                    x = h + f(h)
            return x
    return WrongLayer


def encoder_class(layer: type, norm: type = ref.LayerNorm, final_norm: bool = True) -> type:
    class WrongEncoder(ref.Encoder):
        def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                     norm_first: bool = False) -> None:
            super().__init__(num_layers, d_model, num_heads, d_ff, dropout, norm_first)
            self.layers = torch.nn.ModuleList(layer(d_model, num_heads, d_ff, dropout, norm_first)
                                              for _ in range(num_layers))
            self.norm = norm(d_model) if norm_first else None

        def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
            for module in self.layers:
                x = module(x, mask=mask)
            return self.norm(x) if self.norm is not None and final_norm else x
    return WrongEncoder


def variant(norm: type = ref.LayerNorm, final_norm: bool = True, **layer: object) -> dict[str, Callable]:
    """The overrides of one variant: the classes that carry the mistake."""
    wrong_layer = layer_class(norm=norm, **layer)
    out: dict[str, Callable] = {"encoder.EncoderLayer": wrong_layer,
                                "encoder.Encoder": encoder_class(wrong_layer, norm, final_norm)}
    if norm is not ref.LayerNorm:
        out["encoder.LayerNorm"] = norm
    if layer.get("ffn") is not None:
        out["encoder.PositionwiseFeedForward"] = layer["ffn"]
    return out


VARIANTS: dict[str, dict[str, Callable]] = {
    "pre_ln_for_post_ln": variant(post=PRE),
    "post_ln_for_pre_ln": variant(pre=POST),
    "norm_wrong_axis": variant(norm=norm_class(dim=-2)),
    "unbiased_variance": variant(norm=norm_class(unbiased=True)),
    "eps_outside_sqrt": variant(norm=norm_class(eps_outside=True)),
    "post_ln_norm_before_residual": variant(post="post_norm_then_add"),
    "pre_ln_residual_from_normed": variant(pre="pre_from_normed"),
    "ffn_no_relu": variant(ffn=FFNNoReLU),
    "mask_not_passed": variant(pass_mask=False),
    "pre_ln_no_final_norm": variant(final_norm=False),
    "sublayer_dropout_missing": variant(drop="none"),
    "ffn_sublayer_dropout_missing": variant(drop="attention_only"),
    "dropout_after_residual": variant(drop="residual"),
    "ffn_dropout_after_output": variant(ffn=FFNDropsOutput),
    "attention_dropout_not_given": variant(attn_dropout=False),
    "pre_ln_sublayer_dropout_missing": variant(pre_drop="none"),
    "pre_ln_ffn_sublayer_dropout_missing": variant(pre_drop="attention_only"),
    "ffn_gelu": variant(ffn=FFNGELU),
    "eps_ignored": variant(norm=norm_class(fixed_eps=1e-5)),
}
