"""Chapter 08 extra tests of the classifier, beyond the cases of tests/specs/ch08.py.

The spec's cases are tests/test_public.py (`-k ch08`); these add what a case cannot say: agreement with a
classifier built from PyTorch's own torch.nn.TransformerEncoder given the same weights (both norm_first
values, with padding), that padding changes nothing on a longer random batch, the training harness's
protocol (forward and encode take an optional mask (batch, seq), True = a real token; an attribute
d_model), dropout only in training, and gradients reaching every parameter.
Like the public cases they run against `--impl` (reference by default, `--impl learner` for your course_lib).
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from test_ch05_encoder import _copy_layer  # chapter 05's: our layer's weights into PyTorch's

VOCAB, D_MODEL, HEADS, D_FF, LAYERS = 30, 16, 4, 40, 2


def _model(impl, norm_first: bool = False, pad_id: int = 0):
    torch.manual_seed(8)
    return impl.classifier.TransformerClassifier(vocab_size=VOCAB, d_model=D_MODEL, num_heads=HEADS, d_ff=D_FF,
                                                 num_layers=LAYERS, num_classes=3, dropout=0.1, max_len=64,
                                                 pad_id=pad_id, norm_first=norm_first)


def _batch(pad_id: int = 0, extra: int = 0) -> torch.Tensor:
    """Tokens (4, 12 + extra): reviews of 12, 7, 3 and 1 tokens, padded with pad_id."""
    g = torch.Generator().manual_seed(80)
    tokens = torch.randint(1, VOCAB, (4, 12), generator=g)
    tokens[tokens == pad_id] = pad_id + 1
    keep = torch.arange(12)[None, :] < torch.tensor([[12], [7], [3], [1]])
    tokens = tokens.masked_fill(~keep, pad_id)                                    # (4, 12)
    return torch.cat([tokens, torch.full((4, extra), pad_id)], dim=1)            # (4, 12 + extra)


def _torch_twin(ours: nn.Module, norm_first: bool) -> nn.TransformerEncoder:
    """PyTorch's encoder holding our encoder's weights (chapter 05's copy: random norm gains, so a swap shows)."""
    layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, activation="relu", batch_first=True,
                                       norm_first=norm_first)
    theirs = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(D_MODEL) if norm_first else None,
                                   enable_nested_tensor=False).eval()
    with torch.no_grad():
        for mine, their in zip(ours.encoder.layers, theirs.layers):
            _copy_layer(mine, their)
        if norm_first:
            theirs.norm.weight.copy_(ours.encoder.norm.weight)
            theirs.norm.bias.copy_(ours.encoder.norm.bias)
    return theirs


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_agrees_with_a_classifier_on_torch_transformer_encoder(impl, norm_first) -> None:
    ours = _model(impl, norm_first).eval()
    theirs = _torch_twin(ours, norm_first)
    tokens = _batch()
    keep = tokens != 0                                                            # (batch, seq)
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused eval path may zero padded positions
    try:
        with torch.no_grad():
            x = ours.embed.embedding(tokens) * math.sqrt(D_MODEL) + ours.positional.pe[:, :tokens.size(1)]
            hidden = theirs(x, src_key_padding_mask=~keep)                        # PyTorch: True = ignore
            pooled = (hidden * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)   # (batch, d_model)
            expected = ours.head(pooled)
            got = ours(tokens)
    finally:
        torch.backends.mha.set_fastpath_enabled(before)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pad_id", [0, 4])
def test_more_padding_changes_nothing(impl, pad_id) -> None:
    model = _model(impl, pad_id=pad_id).eval()
    with torch.no_grad():
        short, long = model(_batch(pad_id)), model(_batch(pad_id, extra=20))
    torch.testing.assert_close(short, long, rtol=1e-5, atol=1e-5)


def test_harness_protocol(impl) -> None:
    """The training harness calls model(tokens, mask) and model.encode(tokens, mask); mask True = a real token."""
    model = _model(impl).eval()
    tokens = _batch()
    mask = tokens != 0
    assert model.d_model == D_MODEL
    with torch.no_grad():
        torch.testing.assert_close(model(tokens, mask), model(tokens))
        hidden = model.encode(tokens, mask)
    assert hidden.shape == (4, 12, D_MODEL)
    assert model(tokens).shape == (4, 3)


def test_dropout_only_in_training(impl) -> None:
    model = _model(impl)
    tokens = _batch()
    with torch.no_grad():
        model.eval()
        torch.testing.assert_close(model(tokens), model(tokens))
        model.train()
        torch.manual_seed(0)
        a = model(tokens)
        torch.manual_seed(1)
        assert not torch.allclose(a, model(tokens))


def test_gradients_reach_every_parameter(impl) -> None:
    model = _model(impl).train()
    loss = nn.functional.cross_entropy(model(_batch()), torch.tensor([0, 1, 2, 1]))
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing
