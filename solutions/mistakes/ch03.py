"""Known-wrong variants of chapter 03, keyed like MISTAKES in tests/specs/ch03.py.

Each is the reference with one mistake planted: a split/merge function, or a MultiHeadAttention whose
forward uses them or differs in one step. The variants call the reference's chapter 02 attention.
"""
from __future__ import annotations

import math
from typing import Callable

from torch import Tensor

from course_ref import multihead as ref
from course_ref.attention import scaled_dot_product_attention


def split_no_transpose(x: Tensor, num_heads: int) -> Tensor:
    batch, seq, d_model = x.shape
    return x.reshape(batch, num_heads, seq, d_model // num_heads)


def merge_no_transpose(x: Tensor) -> Tensor:
    batch, heads, seq, d_k = x.shape
    return x.reshape(batch, seq, heads * d_k)


def split_interleaved(x: Tensor, num_heads: int) -> Tensor:
    batch, seq, d_model = x.shape
    return x.view(batch, seq, d_model // num_heads, num_heads).permute(0, 3, 1, 2)  # head i: features i, i + h, ...


def merge_interleaved(x: Tensor) -> Tensor:
    batch, heads, seq, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, seq, heads * d_k)


def split_heads_first(x: Tensor, num_heads: int) -> Tensor:
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads).permute(2, 0, 1, 3)  # (heads, batch, seq, d_k)


def merge_heads_first(x: Tensor) -> Tensor:
    heads, batch, seq, d_k = x.shape
    return x.permute(1, 2, 0, 3).reshape(batch, seq, heads * d_k)


def module(split: Callable = ref.split_heads, merge: Callable = ref.merge_heads, scale_d_model: bool = False,
           project_out: bool = True, shared: bool = False, dropout: str = "training", detach: bool = True) -> type:
    """A MultiHeadAttention class with the given mistakes; ``dropout`` is when attention dropout applies:
    "training" (right), "always" (in evaluation mode too) or "never" (not passed to the attention); ``detach``
    False keeps the weights with their autograd graph."""
    class Wrong(ref.MultiHeadAttention):
        def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
            w_k, w_v = (self.w_q, self.w_q) if shared else (self.w_k, self.w_v)
            q = split(self.w_q(query), self.num_heads)
            if scale_d_model:  # scores / √d_model, written as a rescaled query
                q = q * math.sqrt(self.d_k) / math.sqrt(self.d_model)
            k, v = split(w_k(key), self.num_heads), split(w_v(value), self.num_heads)
            p = {"training": self.dropout if self.training else 0.0, "always": self.dropout, "never": 0.0}[dropout]
            heads, weights = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=p)
            self.attn_weights = weights.detach() if detach else weights
            merged = merge(heads)
            return self.w_o(merged) if project_out else merged
    return Wrong


_mha, _split, _merge = "multihead.MultiHeadAttention", "multihead.split_heads", "multihead.merge_heads"
VARIANTS: dict[str, dict[str, Callable]] = {
    "reshape_no_transpose": {_split: split_no_transpose, _mha: module(split=split_no_transpose, merge=merge_no_transpose)},
    "interleaved_heads": {_split: split_interleaved, _merge: merge_interleaved,
                          _mha: module(split=split_interleaved, merge=merge_interleaved)},
    "merge_no_transpose": {_merge: merge_no_transpose, _mha: module(merge=merge_no_transpose)},
    "scale_by_d_model": {_mha: module(scale_d_model=True)},
    "no_output_projection": {_mha: module(project_out=False)},
    "mask_not_over_heads": {_split: split_heads_first, _merge: merge_heads_first,
                            _mha: module(split=split_heads_first, merge=merge_heads_first)},
    "shared_projection": {_mha: module(shared=True)},
    "dropout_in_evaluation": {_mha: module(dropout="always")},
    "dropout_not_passed": {_mha: module(dropout="never")},
    "weights_not_detached": {_mha: module(detach=False)},
}
