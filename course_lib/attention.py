# course_lib/attention.py: yours to fill in. Replace each `raise NotImplementedError(...)` with your code;
# the docstrings say what to compute. Check your work with `make check CH=02`.
# Generated from solutions/course_ref/attention.py by `course release`: instructors edit solutions/, never this file.
"""Chapter 02 — Attention: scaled dot-product attention.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V            ("Attention Is All You Need", eq. 1)

Mask convention (the whole course): a boolean tensor, True = may attend, broadcastable to the
scores' shape (..., seq_q, seq_k); the same convention as torch.nn.functional.scaled_dot_product_attention.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Attend from each query to all keys and mix the values with the resulting weights.

    Args:
        query: (..., seq_q, d_k) floating tensor; any leading dims (batch, heads, ...).
        key:   (..., seq_k, d_k), same dtype as query.
        value: (..., seq_k, d_v), same dtype as query.
        mask:  optional bool tensor broadcastable to (..., seq_q, seq_k); True = may attend.
               A query whose row is all False ("fully masked") must still give finite numbers.
        dropout_p: probability of dropping an attention weight, 0 <= dropout_p < 1 (0.0 when evaluating).

    Returns:
        output:  (..., seq_q, d_v), the weighted sum of the values.
        weights: (..., seq_q, seq_k), softmax of the scaled scores; each row sums to 1. With
                 dropout_p > 0, the weights after dropout (some zeroed, the others divided by
                 1 - dropout_p): the weights that mix the values.

    Steps: scores = Q Kᵀ / √d_k; masked scores become a very negative *finite* number (-inf would
    turn a fully masked row into NaN); softmax over the keys (the last axis); dropout on the weights
    when dropout_p > 0 (as torch.nn.functional.dropout does: zero each weight with probability
    dropout_p, divide the others by 1 - dropout_p); output = weights V.
    The inputs are never modified in place.

    Example: with one query equal to the only key, the weight is 1 and the output is the value:
    >>> import torch
    >>> q = k = torch.ones(1, 1, 4); v = torch.arange(3.).view(1, 1, 3)
    >>> scaled_dot_product_attention(q, k, v)[0]
    tensor([[[0., 1., 2.]]])
    """
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
            "convert it with mask.bool() or build it with a comparison such as tokens != pad_id"
        )
    raise NotImplementedError("Chapter 02: implement scaled_dot_product_attention in course_lib/attention.py (book chapter 02, exercises/ch02_attention)")
