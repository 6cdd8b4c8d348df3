"""Chapter 05 extra tests of the encoder, beyond the cases of tests/specs/ch05.py.

The spec's cases are tests/test_public.py (`-k ch05`); these add what a case cannot say: agreement with
PyTorch's own torch.nn.LayerNorm, torch.nn.TransformerEncoderLayer and torch.nn.TransformerEncoder given
the same weights (both norm_first values, with and without a padding mask), that padding cannot change
the real tokens' outputs, the final norm of the stack, and dropout only in training.
Like the public cases they run against `--impl` (reference by default, `--impl learner` for your course_lib).

PyTorch's eval "fast path" (a fused kernel taken in eval mode without autograd) may return zeros at
padded positions. These tests turn it off (torch.backends.mha.set_fastpath_enabled(False)), so every
position, padded ones included, is computed the ordinary way and compared.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

D_MODEL, HEADS, D_FF = 16, 4, 40


@contextmanager
def no_fast_path() -> Iterator[None]:
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _copy_layer(ours: nn.Module, theirs: nn.TransformerEncoderLayer) -> None:
    """Give PyTorch's layer our layer's weights (ours were drawn at random, with random norm gains)."""
    with torch.no_grad():
        for norm in (ours.norm1, ours.norm2):  # ones and zeros would hide a swapped gain and shift
            norm.weight.copy_(1 + 0.3 * torch.randn_like(norm.weight))
            norm.bias.copy_(0.2 * torch.randn_like(norm.bias))
        attn = ours.self_attn  # PyTorch packs W_Q, W_K, W_V into one (3 d_model, d_model) matrix
        theirs.self_attn.in_proj_weight.copy_(torch.cat([attn.w_q.weight, attn.w_k.weight, attn.w_v.weight]))
        theirs.self_attn.in_proj_bias.copy_(torch.cat([attn.w_q.bias, attn.w_k.bias, attn.w_v.bias]))
        theirs.self_attn.out_proj.weight.copy_(attn.w_o.weight)
        theirs.self_attn.out_proj.bias.copy_(attn.w_o.bias)
        for name in ("linear1", "linear2"):
            getattr(theirs, name).weight.copy_(getattr(ours.ffn, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours.ffn, name).bias)
        for name in ("norm1", "norm2"):
            getattr(theirs, name).weight.copy_(getattr(ours, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours, name).bias)


def _torch_layer(norm_first: bool) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, activation="relu", batch_first=True,
                                      norm_first=norm_first)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """x (3, 7, d_model) and keep (3, 7): True = a real token; lengths 7, 4 and 2."""
    g = torch.Generator().manual_seed(52)
    x = torch.randn(3, 7, D_MODEL, generator=g)                                    # (batch, seq, d_model)
    keep = torch.arange(7)[None, :] < torch.tensor([[7], [4], [2]])               # (batch, seq)
    return x, keep


@pytest.mark.parametrize("shape,eps", [((4, 10), 1e-5), ((2, 3, 16), 1e-5), ((2, 3, 5, 8), 0.3)])
def test_layernorm_agrees_with_torch(impl, shape, eps) -> None:
    torch.manual_seed(5)
    ours = impl.encoder.LayerNorm(shape[-1], eps=eps)
    theirs = nn.LayerNorm(shape[-1], eps=eps)
    torch.testing.assert_close(ours.weight, theirs.weight)  # ones
    torch.testing.assert_close(ours.bias, theirs.bias)      # zeros
    with torch.no_grad():
        ours.weight.copy_(torch.randn(shape[-1]))
        ours.bias.copy_(torch.randn(shape[-1]))
        theirs.weight.copy_(ours.weight)
        theirs.bias.copy_(ours.bias)
    x = 3.0 + 2.0 * torch.randn(shape)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "padding"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_layer_agrees_with_torch_transformer_encoder_layer(impl, norm_first, masked) -> None:
    torch.manual_seed(4)
    ours = impl.encoder.EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first).eval()
    theirs = _torch_layer(norm_first).eval()
    _copy_layer(ours, theirs)
    x, keep = _batch()
    with no_fast_path():
        out = ours(x, mask=keep[:, None, None, :] if masked else None)   # our mask: True = may attend
        # PyTorch's src_key_padding_mask means the opposite (True = ignore), hence ~keep.
        expected = theirs(x, src_key_padding_mask=~keep if masked else None)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_stack_agrees_with_torch_transformer_encoder(impl, norm_first) -> None:
    torch.manual_seed(6)
    ours = impl.encoder.Encoder(3, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first).eval()
    final = nn.LayerNorm(D_MODEL) if norm_first else None
    theirs = nn.TransformerEncoder(_torch_layer(norm_first), 3, norm=final, enable_nested_tensor=False).eval()
    for mine, torch_layer in zip(ours.layers, theirs.layers):
        _copy_layer(mine, torch_layer)
    if norm_first:
        with torch.no_grad():
            ours.norm.weight.copy_(1 + 0.3 * torch.randn(D_MODEL))
            ours.norm.bias.copy_(0.2 * torch.randn(D_MODEL))
            final.weight.copy_(ours.norm.weight)
            final.bias.copy_(ours.norm.bias)
    x, keep = _batch()
    with no_fast_path():
        out = ours(x, mask=keep[:, None, None, :])
        expected = theirs(x, src_key_padding_mask=~keep)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


def test_final_norm_only_for_pre_ln(impl) -> None:
    post = impl.encoder.Encoder(2, D_MODEL, HEADS, D_FF, norm_first=False)
    pre = impl.encoder.Encoder(2, D_MODEL, HEADS, D_FF, norm_first=True)
    assert isinstance(post.layers, nn.ModuleList) and len(post.layers) == 2
    assert getattr(post, "norm", None) is None, "a Post-LN stack has no final norm: its last layer ends with one"
    assert isinstance(pre.norm, impl.encoder.LayerNorm), "a Pre-LN stack ends with self.norm = LayerNorm(d_model)"


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_padding_does_not_reach_real_tokens(impl, norm_first) -> None:
    """Whatever sits at the padded positions, the real tokens' outputs stay the same."""
    torch.manual_seed(7)
    enc = impl.encoder.Encoder(2, D_MODEL, HEADS, D_FF, norm_first=norm_first).eval()
    x, keep = _batch()
    junk = torch.where(keep[..., None], x, 100 * torch.randn_like(x))   # other values at the padded positions
    mask = keep[:, None, None, :]                                        # (batch, 1, 1, seq)
    with torch.no_grad():
        a, b = enc(x, mask=mask), enc(junk, mask=mask)
    torch.testing.assert_close(a[keep], b[keep], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(enc(x)[keep], enc(junk)[keep]), "without the mask the padding must matter"


def test_dropout_only_in_training(impl) -> None:
    torch.manual_seed(0)
    layer = impl.encoder.EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5)
    x, _ = _batch()
    layer.eval()
    assert torch.equal(layer(x), layer(x)), "in evaluation mode the output must not be random"
    layer.train()
    assert not torch.equal(layer(x), layer(x)), "with dropout=0.5 in training two calls should differ"
