"""Every shape a docstring promises has a case (issue 17, point 5).

The reference's docstrings (solutions/course_ref/*.py) promise shapes that the public cases did not all
try: attention on any number of leading axes, none included, and a single query (02, 03); masks of every
broadcastable shape in multi-head attention (03) and the encoder layer (05); LayerNorm and the FFN on any
leading axes (05); labels of any shape in target_distribution (07). Hidden cases now try each. Planted:
an implementation wrong only on such a shape (a plausible way to be wrong there, or plainly so) loses
exactly the cases of that shape, public and hidden, and nothing else; it had full marks before.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from ..checks.test_property_cases import REF, scores


# ---------------------------------------------------------------- chapter 02: leading axes and seq_q
def bmm_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                  dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Batched matmuls over the leading axes flattened into one: flatten(0, -3) needs one leading axis at least."""
    q, k, v = (t.flatten(0, -3) for t in (query, key, value))                 # (B, seq, d)
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.size(-1))          # (B, seq_q, seq_k)
    scores = scores.view(*query.shape[:-1], key.size(-2))                     # (..., seq_q, seq_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                                   # (..., seq_q, seq_k)
    if dropout_p > 0.0:                                                       # right there: after the softmax
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    output = torch.bmm(weights.flatten(0, -3), v).view(*query.shape[:-1], value.size(-1))  # (..., seq_q, d_v)
    return output, weights


def one_query_unscaled(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                       dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """A fast path for one query (a decoding step) that forgets the 1/√d_k scale."""
    if query.size(-2) == 1:
        query = query * math.sqrt(query.size(-1))                             # cancels the scale
    return REF.attention.scaled_dot_product_attention(query, key, value, mask, dropout_p)


def batches_mixed_past_two_axes(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                                dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Right for (batch, heads) or fewer leading axes; with more, the outputs of the first axis reversed."""
    output, weights = REF.attention.scaled_dot_product_attention(query, key, value, mask, dropout_p)
    return (output.flip(0), weights.flip(0)) if query.dim() > 4 else (output, weights)


# ---------------------------------------------------------------- chapter 03: masks of every broadcastable shape
class PaddingMasksOnly(REF.multihead.MultiHeadAttention):
    """Takes a 4-D mask for a padding mask (batch, 1, 1, seq_k): keeps its first query row only."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is not None and mask.dim() == 4:
            mask = mask[:, :, :1, :]                                          # (batch, heads | 1, 1, seq_k)
        return super().forward(query, key, value, mask)


class MaskSharedByHeads(REF.multihead.MultiHeadAttention):
    """Takes every mask to be shared by the heads: keeps a 4-D mask's first head only."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        if mask is not None and mask.dim() == 4:
            mask = mask[:, :1]                                                # (batch, 1, seq_q | 1, seq_k)
        return super().forward(query, key, value, mask)


class SqueezedOutput(REF.multihead.MultiHeadAttention):
    """Squeezes the output "to drop stray axes": a single query's axis goes too."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        return super().forward(query, key, value, mask).squeeze()             # (batch, d_model) when seq_q = 1


# ---------------------------------------------------------------- chapter 05: leading axes, masks
class RowsLayerNorm(REF.encoder.LayerNorm):
    """Normalises the rows of x flattened to (rows, d_model): flatten(0, -2) needs one leading axis at least."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.flatten(0, -2)).view_as(x)                   # (..., d_model)


class BatchSeqFeedForward(REF.encoder.PositionwiseFeedForward):
    """Unpacks x as (batch, seq, d_model): any other number of leading axes raises."""

    def forward(self, x: Tensor) -> Tensor:
        batch, seq, d_model = x.shape
        return super().forward(x.reshape(batch * seq, d_model)).view(batch, seq, d_model)


class PaddingMaskedLayer(REF.encoder.EncoderLayer):
    """Takes a 4-D mask for a padding mask (batch, 1, 1, seq): keeps its first query row only."""

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return super().forward(x, None if mask is None else mask[..., :1, :])


# ---------------------------------------------------------------- chapter 07: labels of any shape
class BatchSeqLabels(REF.seq2seq.LabelSmoothingLoss):
    """Unpacks the labels as (batch, seq): any other shape raises."""

    def target_distribution(self, target: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        batch, seq = target.shape
        return super().target_distribution(target.view(batch, seq), dtype)    # (batch, seq, V)


PLANTED = [  # chapter, the wrong implementation, the cases it must lose (all of them hidden)
    ("02", {"attention.scaled_dot_product_attention": bmm_attention}, {"h-no-leading-axes"}),
    ("02", {"attention.scaled_dot_product_attention": one_query_unscaled}, {"h-one-query"}),
    ("02", {"attention.scaled_dot_product_attention": batches_mixed_past_two_axes}, {"h-three-leading-axes"}),
    ("03", {"multihead.MultiHeadAttention": PaddingMasksOnly}, {"h-mask-per-query", "h-mask-per-head"}),
    ("03", {"multihead.MultiHeadAttention": MaskSharedByHeads}, {"h-mask-per-head"}),
    ("03", {"multihead.MultiHeadAttention": SqueezedOutput}, {"h-cross-one-query"}),
    ("05", {"encoder.LayerNorm": RowsLayerNorm}, {"h-norm-one-vector"}),
    ("05", {"encoder.PositionwiseFeedForward": BatchSeqFeedForward}, {"h-ffn-tokens", "h-ffn-4d", "h-training-ffn-4d"}),
    ("05", {"encoder.EncoderLayer": PaddingMaskedLayer}, {"h-post-ln-causal-mask"}),
    ("07", {"seq2seq.LabelSmoothingLoss": BatchSeqLabels}, {"h-distribution-flat-labels", "h-distribution-3d-labels"}),
]


@pytest.mark.parametrize("chapter,overrides,loses", PLANTED,
                         ids=[f"ch{c}-{next(iter(o.values())).__name__}" for c, o, _ in PLANTED])
def test_wrong_only_on_a_promised_shape_loses_exactly_its_cases(chapter: str, overrides: dict, loses: set) -> None:
    from course_lib.provided.loader import PatchedImpl

    got = scores(chapter, PatchedImpl(REF, overrides, label="wrong on one shape"), lambda case: True)
    assert {name for name, earned in got.items() if earned == 0} == loses, got
    reference = scores(chapter, REF, lambda case: case.name in loses)
    assert set(reference) == loses and all(v > 0 for v in reference.values()), reference
