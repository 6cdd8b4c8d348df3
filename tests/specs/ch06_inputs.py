"""Chapter 06 checks, their inputs (a part of tests/specs/ch06.py, loaded by it): tokens with padding, a
decoder layer's or a decoder's weights and masks, a small Transformer's weights, all deterministic by seed.
Chapter 07's checks build on these too.
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from course_lib.provided.chapters import load_spec_part

_ch05 = load_spec_part("05", "inputs")  # chapter 05's makers of linear, norm, layer and stack weights
_linear, _norm = _ch05._linear, _ch05._norm
_layer = functools.partial(_ch05._layer, cross=True)  # a decoder layer's parameters (cross=False: an encoder layer's)
P = _ch05.P  # prefix of the inputs that are parameters, e.g. "p:cross_attn.w_q.weight"


# ---------------------------------------------------------------- inputs (deterministic by seed)
def _tokens(g: torch.Generator, batch: int, seq: int, vocab: int, pad_id: int, left: bool = False) -> Tensor:
    """Token ids (batch, seq) in 0 .. vocab - 1 without pad_id, then padded: sequence b has seq - b % (seq - 1)
    real tokens (the first one is full), padded at the end (at the start with ``left``)."""
    ids = torch.randint(0, vocab - 1, (batch, seq), generator=g)
    ids = ids + (ids >= pad_id).long()                                   # (batch, seq) skip pad_id
    lengths = seq - torch.arange(batch) % (seq - 1)                      # (batch,) seq, seq - 1, ...
    pos = torch.arange(seq)[None, :]                                     # (1, seq)
    real = pos >= seq - lengths[:, None] if left else pos < lengths[:, None]  # (batch, seq)
    return torch.where(real, ids, torch.full_like(ids, pad_id))


def mask_inputs(seed: int, batch: int = 3, seq: int = 6, vocab: int = 10, pad_id: int = 0) -> dict[str, Tensor]:
    """tokens (batch, seq) padded at the end, a different number of pads per sequence, and pad_id."""
    g = torch.Generator().manual_seed(seed)
    return {"tokens": _tokens(g, batch, seq, vocab, pad_id), "pad_id": torch.tensor(pad_id), "n": torch.tensor(seq)}


def decoder_inputs(seed: int, batch: int = 2, tgt_seq: int = 5, src_seq: int = 7, d_model: int = 12,
                   heads: int = 3, d_ff: int = 24, norm_first: bool = False, layers: int | None = None,
                   tgt_mask: str | None = "causal", memory_mask: bool = False,
                   dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """x (batch, tgt_seq, d_model), memory (batch, src_seq, d_model), the weights of one DecoderLayer
    (``layers`` None) or of a Decoder of ``layers`` layers (plus its final norm for Pre-LN), and masks:
    ``tgt_mask`` None, "causal" ((tgt_seq, tgt_seq)), "target" ((batch, 1, tgt_seq, tgt_seq), padded at the
    end) or "left" (a target padded at the start, so that a query row can be fully masked);
    ``memory_mask`` a padding mask of the source (batch, 1, 1, src_seq)."""
    g = torch.Generator().manual_seed(seed)
    inputs = {"x": torch.randn(batch, tgt_seq, d_model, generator=g, dtype=dtype),
              "memory": torch.randn(batch, src_seq, d_model, generator=g, dtype=dtype),
              "num_heads": torch.tensor(heads), "d_ff": torch.tensor(d_ff), "norm_first": torch.tensor(norm_first)}
    inputs.update(_ch05._stack(g, _layer, layers, d_model, d_ff, dtype, norm_first))
    causal = torch.tril(torch.ones(tgt_seq, tgt_seq, dtype=torch.bool))          # (tgt_seq, tgt_seq)
    if tgt_mask == "causal":
        inputs["tgt_mask"] = causal
    elif tgt_mask in ("target", "left"):
        keep = _tokens(g, batch, tgt_seq, 5, 0, left=tgt_mask == "left") != 0      # (batch, tgt_seq)
        inputs["tgt_mask"] = keep[:, None, None, :] & causal                     # (batch, 1, tgt_seq, tgt_seq)
    if memory_mask:
        inputs["memory_mask"] = (_tokens(g, batch, src_seq, 5, 0) != 0)[:, None, None, :]  # (batch, 1, 1, src_seq)
    return inputs


def model_inputs(seed: int, batch: int = 2, src_seq: int = 7, tgt_seq: int = 5, src_vocab: int = 11,
                 tgt_vocab: int = 13, d_model: int = 16, heads: int = 4, d_ff: int = 32, layers: int = 2,
                 pad_id: int = 0, norm_first: bool = False, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """src (batch, src_seq) and tgt (batch, tgt_seq) token ids padded at the end, the sizes of a small
    TransformerConfig, all its weights, and ``changed_at``: a target position to perturb."""
    g = torch.Generator().manual_seed(seed)
    inputs = {"src": _tokens(g, batch, src_seq, src_vocab, pad_id),
              "tgt": _tokens(g, batch, tgt_seq, tgt_vocab, pad_id),
              "src_vocab": torch.tensor(src_vocab), "tgt_vocab": torch.tensor(tgt_vocab),
              "d_model": torch.tensor(d_model), "num_heads": torch.tensor(heads), "d_ff": torch.tensor(d_ff),
              "num_layers": torch.tensor(layers), "pad_id": torch.tensor(pad_id),
              "norm_first": torch.tensor(norm_first), "changed_at": torch.tensor(tgt_seq // 2)}
    for side, vocab in (("src", src_vocab), ("tgt", tgt_vocab)):
        embedding = torch.randn(vocab, d_model, generator=g, dtype=dtype) / d_model ** 0.5  # (vocab, d_model)
        inputs[f"{P}{side}_embed.embedding.weight"] = embedding
    for i in range(layers):
        inputs.update(_layer(g, f"encoder.layers.{i}.", d_model, d_ff, dtype, cross=False))
        inputs.update(_layer(g, f"decoder.layers.{i}.", d_model, d_ff, dtype))
    if norm_first:
        inputs.update(_norm(g, "encoder.norm", d_model, dtype))
        inputs.update(_norm(g, "decoder.norm", d_model, dtype))
    inputs.update(_linear(g, "generator", d_model, tgt_vocab, dtype))
    return inputs


def leak_inputs(seed: int, **sizes: int) -> dict[str, Tensor]:
    """``model_inputs`` and tgt_changed (batch, tgt_seq): tgt with another real token at ``changed_at``."""
    inputs = model_inputs(seed, **sizes)
    t, vocab, pad = int(inputs["changed_at"]), int(inputs["tgt_vocab"]), int(inputs["pad_id"])
    changed = inputs["tgt"].clone()                                          # (batch, tgt_seq)
    new = (changed[:, t] + 1) % vocab                                        # (batch,)
    changed[:, t] = torch.where(new == pad, (new + 1) % vocab, new)          # another real token
    return {**inputs, "tgt_changed": changed}


def fully_masked_rows(inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """The output rows whose tgt_mask row is all False (not graded; they must still be finite)."""
    return {"output": ~inputs["tgt_mask"].any(-1)[:, 0, :, None]}      # (batch, tgt_seq, 1)


def config_inputs(seed: int, vocab: int = 9, d_model: int = 8) -> dict[str, Tensor]:
    """The sizes for the configuration checks (nothing random)."""
    return {"vocab": torch.tensor(vocab), "d_model": torch.tensor(d_model)}
