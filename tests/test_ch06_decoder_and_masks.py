"""Chapter 06 extra tests of the masks, the decoder and the Transformer, beyond tests/specs/ch06.py.

The spec's cases are tests/test_public.py (`-k ch06`); these add what a case cannot say: agreement with
PyTorch's own torch.nn.TransformerDecoderLayer and torch.nn.TransformerDecoder given the same weights
(batch_first, ReLU, both norm_first values, causal and padding masks, eval mode), the masks against
PyTorch's generate_square_subsequent_mask, the future-leak test on a whole model, cross-attention with
source and target of different lengths, weight tying, the base model's parameter count derived by hand,
and dropout only in training. Like the public cases they run against `--impl` (reference by default,
`--impl learner` for your course_lib).

PyTorch's masks mean the opposite of ours: for nn.Transformer*, True = NOT allowed (tgt_mask) and True =
ignore this key (key_padding_mask); ours say True = may attend. Hence the ``~`` below. PyTorch gives NaN
for a fully masked row, so the batches compared with it are padded at the end (position 0 is always real).
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


def _copy_attention(ours: nn.Module, theirs: nn.MultiheadAttention) -> None:
    """PyTorch packs W_Q, W_K, W_V into one (3 d_model, d_model) matrix."""
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def _copy_layer(ours: nn.Module, theirs: nn.TransformerDecoderLayer) -> None:
    """Give PyTorch's layer our layer's weights (ours drawn at random, with random norm gains)."""
    with torch.no_grad():
        for name in ("norm1", "norm2", "norm3"):  # ones and zeros would hide a swapped gain and shift
            getattr(ours, name).weight.copy_(1 + 0.3 * torch.randn(D_MODEL))
            getattr(ours, name).bias.copy_(0.2 * torch.randn(D_MODEL))
            getattr(theirs, name).weight.copy_(getattr(ours, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours, name).bias)
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_attention(ours.cross_attn, theirs.multihead_attn)  # PyTorch's name for the cross-attention
        for name in ("linear1", "linear2"):
            getattr(theirs, name).weight.copy_(getattr(ours.ffn, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours.ffn, name).bias)


def _torch_layer(norm_first: bool) -> nn.TransformerDecoderLayer:
    return nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, activation="relu", batch_first=True,
                                      norm_first=norm_first)


def _batch() -> tuple[torch.Tensor, ...]:
    """x (3, 6, d_model) and memory (3, 8, d_model): the target and the source have different lengths;
    keep_tgt (3, 6) with target lengths 6, 4, 2 and keep_src (3, 8) with source lengths 8, 5, 3."""
    g = torch.Generator().manual_seed(62)
    x = torch.randn(3, 6, D_MODEL, generator=g)                                   # (batch, tgt_seq, d_model)
    memory = torch.randn(3, 8, D_MODEL, generator=g)                              # (batch, src_seq, d_model)
    keep_tgt = torch.arange(6)[None, :] < torch.tensor([[6], [4], [2]])          # (batch, tgt_seq)
    keep_src = torch.arange(8)[None, :] < torch.tensor([[8], [5], [3]])          # (batch, src_seq)
    return x, memory, keep_tgt, keep_src


# ---------------------------------------------------------------- masks
def test_masks_by_hand(impl) -> None:
    tokens = torch.tensor([[4, 5, 6], [7, 8, 0]])                                # pad_id 0: one pad in row 1
    pad = impl.masks.padding_mask(tokens, 0)
    assert pad.dtype == torch.bool and pad.shape == (2, 1, 1, 3), "padding_mask is (batch, 1, 1, seq) bool"
    assert pad[:, 0, 0].tolist() == [[True, True, True], [True, True, False]]
    causal = impl.masks.causal_mask(3)
    assert causal.dtype == torch.bool and causal.tolist() == [[True, False, False], [True, True, False],
                                                               [True, True, True]]
    target = impl.masks.target_mask(tokens, 0)
    assert target.shape == (2, 1, 3, 3)
    assert target[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert torch.equal(target[0, 0], causal), "a sequence without padding gets the causal mask itself"


@pytest.mark.parametrize("n", [1, 2, 7])
def test_causal_mask_is_pytorchs_square_subsequent_mask_inverted(impl, n) -> None:
    theirs = nn.Transformer.generate_square_subsequent_mask(n)  # float: 0 = allowed, -inf = not allowed
    assert torch.equal(impl.masks.causal_mask(n), theirs == 0)


def test_masks_follow_the_tokens_device(impl) -> None:
    tokens = torch.tensor([[1, 2, 0]], device="meta")
    assert impl.masks.target_mask(tokens, 0).device.type == "meta"
    assert impl.masks.causal_mask(2, device="meta").device.type == "meta"


# ---------------------------------------------------------------- agreement with PyTorch's decoder
@pytest.mark.parametrize("masked", [False, True], ids=["causal", "causal+padding"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_layer_agrees_with_torch_transformer_decoder_layer(impl, norm_first, masked) -> None:
    torch.manual_seed(4)
    ours = impl.decoder.DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first).eval()
    theirs = _torch_layer(norm_first).eval()
    _copy_layer(ours, theirs)
    x, memory, keep_tgt, keep_src = _batch()
    causal = impl.masks.causal_mask(x.size(1))                                    # (tgt_seq, tgt_seq)
    tgt_mask = keep_tgt[:, None, None, :] & causal if masked else causal          # ours: True = may attend
    with no_fast_path():
        out = ours(x, memory, tgt_mask=tgt_mask, memory_mask=keep_src[:, None, None, :] if masked else None)
        expected = theirs(x, memory, tgt_mask=~causal,                            # PyTorch: True = not allowed
                          tgt_key_padding_mask=~keep_tgt if masked else None,     # True = ignore this key
                          memory_key_padding_mask=~keep_src if masked else None)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_stack_agrees_with_torch_transformer_decoder(impl, norm_first) -> None:
    torch.manual_seed(6)
    ours = impl.decoder.Decoder(3, D_MODEL, HEADS, D_FF, dropout=0.1, norm_first=norm_first).eval()
    final = nn.LayerNorm(D_MODEL) if norm_first else None
    theirs = nn.TransformerDecoder(_torch_layer(norm_first), 3, norm=final).eval()
    for mine, torch_layer in zip(ours.layers, theirs.layers):
        _copy_layer(mine, torch_layer)
    if norm_first:
        with torch.no_grad():
            ours.norm.weight.copy_(1 + 0.3 * torch.randn(D_MODEL))
            ours.norm.bias.copy_(0.2 * torch.randn(D_MODEL))
            final.weight.copy_(ours.norm.weight)
            final.bias.copy_(ours.norm.bias)
    x, memory, keep_tgt, keep_src = _batch()
    tokens = torch.where(keep_tgt, 1, 0)                                          # pad_id 0 where keep is False
    with no_fast_path():
        out = ours(x, memory, tgt_mask=impl.masks.target_mask(tokens, 0), memory_mask=keep_src[:, None, None, :])
        expected = theirs(x, memory, tgt_mask=~impl.masks.causal_mask(6), tgt_key_padding_mask=~keep_tgt,
                          memory_key_padding_mask=~keep_src)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


def test_final_norm_only_for_pre_ln(impl) -> None:
    post = impl.decoder.Decoder(2, D_MODEL, HEADS, D_FF, norm_first=False)
    pre = impl.decoder.Decoder(2, D_MODEL, HEADS, D_FF, norm_first=True)
    assert isinstance(post.layers, nn.ModuleList) and len(post.layers) == 2
    assert getattr(post, "norm", None) is None, "a Post-LN stack has no final norm: its last layer ends with one"
    assert isinstance(pre.norm, impl.encoder.LayerNorm), "a Pre-LN stack ends with self.norm = LayerNorm(d_model)"


# ---------------------------------------------------------------- cross-attention and masks at work
def test_cross_attention_shapes_with_different_lengths(impl) -> None:
    layer = impl.decoder.DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    x, memory, _, keep_src = _batch()                                             # tgt_seq 6, src_seq 8
    out = layer(x, memory, tgt_mask=impl.masks.causal_mask(6), memory_mask=keep_src[:, None, None, :])
    assert out.shape == x.shape, "the decoder's output has the target's length"
    assert layer.cross_attn.attn_weights.shape == (3, HEADS, 6, 8), "cross-attention weights: (batch, heads, tgt, src)"
    assert layer.self_attn.attn_weights.shape == (3, HEADS, 6, 6)
    weights = layer.cross_attn.attn_weights
    assert float(weights[1, :, :, 5:].abs().max()) == 0.0, "no weight on the padded source positions"


def test_padded_source_positions_do_not_matter(impl) -> None:
    """Whatever the encoder left at padded source positions, the decoder's outputs stay the same."""
    torch.manual_seed(7)
    dec = impl.decoder.Decoder(2, D_MODEL, HEADS, D_FF).eval()
    x, memory, _, keep_src = _batch()
    junk = torch.where(keep_src[..., None], memory, 100 * torch.randn_like(memory))
    mask, causal = keep_src[:, None, None, :], impl.masks.causal_mask(6)
    with torch.no_grad():
        torch.testing.assert_close(dec(x, memory, causal, mask), dec(x, junk, causal, mask), rtol=1e-5, atol=1e-5)
        assert not torch.allclose(dec(x, memory, causal), dec(x, junk, causal)), "without the mask they must matter"


def _small_model(impl, **changes):
    config = impl.transformer.TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=D_MODEL, num_heads=HEADS,
                                                d_ff=D_FF, num_layers=2, max_len=32, pad_id=0, **changes)
    return impl.transformer.Transformer(config).eval()


def test_no_future_leak_in_the_whole_model(impl) -> None:
    """Change target token t: the logits before t stay exactly as they were, those from t on change."""
    torch.manual_seed(8)
    model = _small_model(impl)
    src = torch.randint(1, 11, (2, 7))
    tgt = torch.randint(1, 13, (2, 6))
    with torch.no_grad():
        before = model(src, tgt)                                                  # (batch, tgt_seq, tgt_vocab)
        for t in range(6):
            changed = tgt.clone()
            changed[:, t] = tgt[:, t] % 12 + 1                                    # another real token
            after = model(src, changed)
            torch.testing.assert_close(after[:, :t], before[:, :t], rtol=0, atol=1e-6)
            assert (after[:, t] - before[:, t]).abs().max() > 1e-3, f"position {t} must see its own token"


def test_a_target_starting_with_padding_stays_finite(impl) -> None:
    model = _small_model(impl)
    src = torch.tensor([[3, 4, 5, 0]])
    tgt = torch.tensor([[0, 0, 6, 7]])                                            # rows 0 and 1 fully masked
    with torch.no_grad():
        assert torch.isfinite(model(src, tgt)).all(), "a fully masked row must give finite values, not NaN"


def test_forward_is_encode_decode_generator(impl) -> None:
    model = _small_model(impl)
    src, tgt = torch.tensor([[3, 4, 5, 0, 0]]), torch.tensor([[1, 2, 9, 0]])
    with torch.no_grad():
        src_mask, tgt_mask = impl.masks.padding_mask(src, 0), impl.masks.target_mask(tgt, 0)
        memory = model.encode(src, src_mask)
        assert memory.shape == (1, 5, D_MODEL)
        logits = model.generator(model.decode(tgt, memory, src_mask, tgt_mask))
        torch.testing.assert_close(model(src, tgt), logits)
    assert logits.shape == (1, 4, 13)


# ---------------------------------------------------------------- configuration, tying, parameter count
def test_weight_tying_shares_parameters(impl) -> None:
    model = _small_model(impl, tie_embeddings=True)
    assert model.generator.weight is model.tgt_embed.embedding.weight
    assert model.src_embed.embedding.weight is not model.tgt_embed.embedding.weight
    untied = sum(p.numel() for p in _small_model(impl).parameters())
    assert sum(p.numel() for p in model.parameters()) == untied - 13 * D_MODEL
    with pytest.raises(ValueError):
        _small_model(impl, share_embeddings=True)                                 # 11 != 13 ids
    shared = impl.transformer.Transformer(impl.transformer.TransformerConfig(
        9, 9, d_model=8, num_heads=2, d_ff=16, num_layers=1, tie_embeddings=True, share_embeddings=True))
    assert shared.src_embed.embedding.weight is shared.tgt_embed.embedding.weight is shared.generator.weight


def test_base_model_parameter_count_by_hand(impl) -> None:
    """The paper's base model on a shared vocabulary of 37,000 ids, counted from the sizes alone.

    One attention: 4 (512·512 + 512); one FFN: 512·2048 + 2048 + 2048·512 + 512; a norm: 2·512.
    Encoder layer = attention + FFN + 2 norms; decoder layer = 2 attentions + FFN + 3 norms.
    With tying: one 37,000 × 512 embedding and the generator's bias (37,000).
    """
    config = impl.transformer.TransformerConfig.base(37000, 37000)
    assert (config.d_model, config.num_heads, config.d_ff, config.num_layers, config.dropout) == (512, 8, 2048, 6, 0.1)
    attention, ffn, norm = 4 * (512 * 512 + 512), 512 * 2048 + 2048 + 2048 * 512 + 512, 2 * 512
    by_hand = 6 * (attention + ffn + 2 * norm) + 6 * (2 * attention + ffn + 3 * norm) + 37000 * 512 + 37000
    with torch.device("meta"):                                                    # sizes only, no memory
        model = impl.transformer.Transformer(config)
    assert sum(p.numel() for p in model.parameters()) == by_hand == 63_119_496


def test_dropout_only_in_training(impl) -> None:
    torch.manual_seed(0)
    layer = impl.decoder.DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5)
    x, memory, _, _ = _batch()
    layer.eval()
    assert torch.equal(layer(x, memory), layer(x, memory)), "in evaluation mode the output must not be random"
    layer.train()
    assert not torch.equal(layer(x, memory), layer(x, memory)), "with dropout=0.5 in training two calls should differ"
