"""Chapter 02 extra tests of scaled dot-product attention, beyond the cases of tests/specs/ch02.py.

The spec's cases are tests/test_public.py (`-k ch02`); these add what a case cannot say: agreement
with PyTorch's fused attention, the error for a float mask, and dropout. Like the public cases they
run against `--impl` (reference by default, `--impl learner` for your course_lib).
"""
from __future__ import annotations

import pytest
import torch


def test_rejects_a_float_mask_with_a_clear_error(impl) -> None:
    q = torch.randn(1, 2, 4)
    with pytest.raises(TypeError, match="bool"):
        impl.attention.scaled_dot_product_attention(q, q, q, mask=torch.ones(2, 2))


def test_agrees_with_pytorch_fused_attention(impl) -> None:
    """An independent peer: torch's own scaled_dot_product_attention (same mask convention)."""
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 4, 7, 16, generator=g) for _ in range(3))  # (batch, heads, seq, d_k)
    mask = torch.rand(2, 1, 7, 7, generator=g) > 0.4
    mask[..., 0] = True  # no fully masked row: torch gives NaN there by design
    ours, weights = impl.attention.scaled_dot_product_attention(q, k, v, mask=mask)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 7))


def test_dropout_is_applied_only_when_asked(impl) -> None:
    q = torch.randn(1, 8, 16)
    fn = impl.attention.scaled_dot_product_attention
    _, kept = fn(q, q, q, dropout_p=0.0)
    torch.manual_seed(0)
    _, dropped = fn(q, q, q, dropout_p=0.5)
    assert torch.equal(kept, fn(q, q, q)[1])
    assert (dropped == 0).any(), "with dropout_p=0.5 some attention weights should be zeroed"
