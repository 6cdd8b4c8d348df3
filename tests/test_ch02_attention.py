"""Chapter 02 public checks: scaled dot-product attention.

Each case of tests/specs/ch02.py becomes one test; it runs against `--impl` (reference by default,
`--impl learner` for your course_lib) and fails with the same message `course check ch02` prints.
"""
from __future__ import annotations

import pytest
import torch

from course_lib.provided import chapters

SPEC = chapters.load_spec("02")


@pytest.mark.parametrize("case", [c.name for c in SPEC.CASES])
def test_public_case(impl, case: str) -> None:
    (result,) = chapters.run_chapter("02", impl, cases=[case])
    assert result.status == "pass", result.message


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
