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
    ### BEGIN SOLUTION
    d_k = query.size(-1)
    # Q Kᵀ / √d_k, with the queries scaled rather than the scores: the same numbers up to rounding,
    # and seq_q x d_k divisions instead of seq_q x seq_k (in the backward pass too).
    scores = (query / math.sqrt(d_k)) @ key.transpose(-2, -1)  # (..., seq_q, seq_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., seq_q, seq_k)
    if dropout_p > 0.0:
        # Keep each weight with probability 1 - p and divide the kept ones by 1 - p (the expected weight
        # is unchanged). Uniform draws compared with p, in place, cost less on the CPU than the Bernoulli
        # draws of torch.nn.functional.dropout, and the weights are the largest tensor dropped.
        keep = torch.rand_like(weights).ge_(dropout_p)  # (..., seq_q, seq_k): 1.0 kept, 0.0 dropped
        weights = weights * keep.div_(1 - dropout_p)  # (..., seq_q, seq_k)
    output = weights @ value  # (..., seq_q, d_v)
    return output, weights
    ### END SOLUTION
