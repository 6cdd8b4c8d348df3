"""Known-wrong variants of scaled_dot_product_attention, keyed like MISTAKES in tests/specs/ch02.py."""
from __future__ import annotations

import math
import warnings
from typing import Callable

import torch
from torch import Tensor

BIG = None  # marker: use the dtype's most negative finite number


def variant(scale: Callable[[Tensor, Tensor], float] = lambda q, v: math.sqrt(q.size(-1)),
            fill: float | None = BIG, invert: bool = False, use_mask: bool = True, axis: int = -1,
            return_scores: bool = False, mask_after: bool = False, inplace: bool = False,
            mix_keys: bool = False, mask_batch_seq_k: bool = False, swap: bool = False,
            dot_T: bool = False, drop: str = "weights") -> Callable:
    """The reference with the mistakes asked for; ``drop`` is where dropout goes: "weights" (right), "nowhere"
    (dropout_p ignored), "scores" (before the softmax) or "unscaled" (kept weights not divided by 1 - p)."""
    def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                  dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
        with warnings.catch_warnings():  # .T on a >2-D tensor warns (deprecated); a learner sees it, refs need not
            warnings.simplefilter("ignore", UserWarning)
            key_t = key.T if dot_T else key.transpose(-2, -1)
        if inplace:
            query = query.div_(math.sqrt(query.size(-1)))
            scores = query @ key_t
        else:
            scores = query @ key_t / scale(query, value)
        if mask is not None and mask_batch_seq_k:
            mask = mask[:, None, None, :]
        if mask is not None and use_mask and not mask_after:
            hide = mask if invert else ~mask
            scores = scores.masked_fill(hide, torch.finfo(scores.dtype).min if fill is BIG else fill)
        if dropout_p > 0.0 and drop == "scores":
            scores = torch.nn.functional.dropout(scores, p=dropout_p)
        weights = torch.softmax(scores, dim=axis)
        if dropout_p > 0.0 and drop == "weights":
            weights = torch.nn.functional.dropout(weights, p=dropout_p)
        elif dropout_p > 0.0 and drop == "unscaled":
            weights = torch.nn.functional.dropout(weights, p=dropout_p) * (1 - dropout_p)
        if mask is not None and mask_after:
            weights = weights.masked_fill(~mask, 0.0)
        mixed = key if mix_keys else value
        output, second = weights @ mixed, (scores if return_scores else weights)
        return (second, output) if swap else (output, second)
    return attention


_fn = "attention.scaled_dot_product_attention"
VARIANTS: dict[str, dict[str, Callable]] = {
    "no_scale": {_fn: variant(scale=lambda q, v: 1.0)},
    "scale_by_d_k": {_fn: variant(scale=lambda q, v: float(q.size(-1)))},
    "scale_by_d_v": {_fn: variant(scale=lambda q, v: math.sqrt(v.size(-1)))},
    "softmax_wrong_axis": {_fn: variant(axis=-2)},
    "inverted_mask": {_fn: variant(invert=True)},
    "mask_ignored": {_fn: variant(use_mask=False)},
    "zero_fill": {_fn: variant(fill=0.0)},
    "neg_inf_fill": {_fn: variant(fill=float("-inf"))},
    "returns_scores": {_fn: variant(return_scores=True)},
    "mask_after_softmax": {_fn: variant(mask_after=True)},
    "inplace_scale": {_fn: variant(inplace=True)},
    "mixes_keys": {_fn: variant(mix_keys=True)},
    "big_negative_fill": {_fn: variant(fill=-1e9)},
    "mask_assumed_batch_seq_k": {_fn: variant(mask_batch_seq_k=True)},
    "swapped_return": {_fn: variant(swap=True)},
    "dot_T": {_fn: variant(dot_T=True)},
    "dropout_missing": {_fn: variant(drop="nowhere")},
    "dropout_before_softmax": {_fn: variant(drop="scores")},
    "dropout_not_rescaled": {_fn: variant(drop="unscaled")},
}
