"""Chapter 03 extra tests of MultiHeadAttention, beyond the cases of tests/specs/ch03.py.

The spec's cases are tests/test_public.py (`-k ch03`); these add what a case cannot say: agreement with
PyTorch's own torch.nn.MultiheadAttention given the same weights (self- and cross-attention, with a
padding mask), the error for a d_model that the heads do not divide, and dropout only in training.
Like the public cases they run against `--impl` (reference by default, `--impl learner` for your course_lib).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn


def _pair(impl, d_model: int = 16, num_heads: int = 4):
    """Your module and PyTorch's, holding the same weights, in evaluation mode."""
    torch.manual_seed(3)
    ours = impl.multihead.MultiHeadAttention(d_model, num_heads).eval()
    theirs = nn.MultiheadAttention(d_model, num_heads, batch_first=True).eval()
    with torch.no_grad():  # PyTorch packs W_Q, W_K, W_V into one (3 d_model, d_model) matrix
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)
    return ours, theirs


@pytest.mark.parametrize("seq_k", [None, 9], ids=["self", "cross"])
def test_agrees_with_torch_multihead_attention(impl, seq_k) -> None:
    ours, theirs = _pair(impl)
    g = torch.Generator().manual_seed(12)
    query = torch.randn(3, 6, 16, generator=g)                         # (batch, seq_q, d_model)
    memory = query if seq_k is None else torch.randn(3, seq_k, 16, generator=g)
    keep = torch.arange(memory.size(1))[None, :] < torch.tensor([[memory.size(1)], [4], [2]])  # (batch, seq_k)
    out = ours(query, memory, memory, mask=keep[:, None, None, :])     # our mask: True = may attend
    # PyTorch's key_padding_mask means the opposite (True = ignore), hence ~keep.
    expected, weights = theirs(query, memory, memory, key_padding_mask=~keep, average_attn_weights=False)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours.attn_weights, weights, rtol=1e-4, atol=1e-5)


def test_heads_must_divide_d_model(impl) -> None:
    with pytest.raises(ValueError, match="divisible"):
        impl.multihead.MultiHeadAttention(10, 4)


def test_dropout_only_in_training(impl) -> None:
    torch.manual_seed(0)
    mha = impl.multihead.MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 8, 16)
    mha.eval()
    first = mha(x, x, x)
    assert torch.equal(first, mha(x, x, x)), "in evaluation mode the output must not be random"
    mha.train()
    mha(x, x, x)
    assert (mha.attn_weights == 0).any(), "with dropout=0.5 in training some attention weights should be zeroed"
