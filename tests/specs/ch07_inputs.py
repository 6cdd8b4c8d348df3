"""Chapter 07 checks, their inputs (a part of tests/specs/ch07.py, loaded by it): padded targets, fixed logits,
the schedule's read steps, successor tables and a small chapter 06 Transformer's weights, all deterministic by seed.
"""
from __future__ import annotations

import torch
from torch import Tensor

from course_lib.provided.chapters import load_spec_part

_ch06 = load_spec_part("06", "inputs")  # chapter 06's small Transformer's weights
PAD, BOS, EOS = 0, 1, 2  # the ids of most cases


# ---------------------------------------------------------------- inputs (deterministic by seed)
def _targets(g: torch.Generator, batch: int, seq: int, vocab: int, bos: int, eos: int, pad: int) -> Tensor:
    """Targets (batch, seq): row b holds seq - (2 b) % seq tokens (at least 1), the last of them EOS, then
    padding; the other tokens avoid pad, bos and eos. Row 0 is full (its EOS in the last position)."""
    special = torch.tensor([pad, bos, eos])
    words = torch.tensor([t for t in range(vocab) if t not in special.tolist()])     # (vocab - 3,)
    ids = words[torch.randint(0, len(words), (batch, seq), generator=g)]             # (batch, seq)
    lengths = (seq - (2 * torch.arange(batch)) % seq).clamp(min=1)                   # (batch,) seq, seq - 2, ...
    pos = torch.arange(seq)[None, :]                                                 # (1, seq)
    ids = torch.where(pos == lengths[:, None] - 1, torch.full_like(ids, eos), ids)   # EOS ends each row
    return torch.where(pos < lengths[:, None], ids, torch.full_like(ids, pad))       # (batch, seq)


def shift_inputs(seed: int, batch: int = 3, seq: int = 6, vocab: int = 10, bos: int = BOS, eos: int = EOS,
                 pad: int = PAD) -> dict[str, Tensor]:
    """tgt (batch, seq) padded targets, and the ids bos_id, pad_id."""
    g = torch.Generator().manual_seed(seed)
    return {"tgt": _targets(g, batch, seq, vocab, bos, eos, pad), "bos_id": torch.tensor(bos),
            "pad_id": torch.tensor(pad)}


def loss_inputs(seed: int, batch: int = 3, seq: int = 6, vocab: int = 11, pad: int = PAD, smoothing: float = 0.1,
                padding_rows: int = 0, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """logits (batch, seq, vocab) ~ 2 N(0, 1), target (batch, seq) padded (its last ``padding_rows`` rows all
    padding; all of them when padding_rows >= batch, and then ``target_with_labels``, the target before its
    rows were padded, whose loss shows that a loss of 0 is computed, not constant), vocab_size, pad_id,
    smoothing."""
    g = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(batch, seq, vocab, generator=g, dtype=dtype)               # (batch, seq, vocab)
    target = _targets(g, batch, seq, vocab, (pad + 1) % vocab, (pad + 2) % vocab, pad)  # (batch, seq)
    inputs = {"logits": logits, "target": target.clone(), "vocab_size": torch.tensor(vocab),
              "pad_id": torch.tensor(pad), "smoothing": torch.tensor(smoothing, dtype=torch.float64)}
    if padding_rows:
        inputs["target"][batch - min(padding_rows, batch):] = pad
    if padding_rows >= batch:
        inputs["target_with_labels"] = target
    return inputs


def label_inputs(seed: int, shape: tuple[int, ...], batch: int = 4, seq: int = 6, vocab: int = 11,
                 pad: int = PAD) -> dict[str, Tensor]:
    """``loss_inputs``' padded target (batch, seq) reshaped to ``shape``, without logits: target_distribution
    takes labels of any shape (...)."""
    inputs = loss_inputs(seed, batch=batch, seq=seq, vocab=vocab, pad=pad)
    del inputs["logits"]
    return {**inputs, "target": inputs["target"].reshape(shape)}                       # shape


def schedule_inputs(seed: int, d_model: int = 512, warmup: int = 4000, steps: tuple[int, ...] = (
        0, 1, 2, 99, 1999, 3998, 3999, 4000, 9999, 99999)) -> dict[str, Tensor]:
    """The steps (counted from 0, as the harness counts them) at which to read the schedule."""
    return {"steps": torch.tensor(steps), "d_model": torch.tensor(d_model), "warmup": torch.tensor(warmup)}


def successor_inputs(seed: int, batch: int = 3, vocab: int = 12, lengths: tuple[int, ...] = (4, 1, 6),
                     max_len: int = 9) -> dict[str, Tensor]:
    """src (batch, vocab): a successor table per sequence, src[b, v] = the token after v (see SuccessorModel).

    From BOS, row b's chain visits lengths[b] - 1 distinct ordinary tokens, then EOS (lengths[b] tokens in
    all, EOS included); after EOS it goes on with ordinary tokens. A length of 0 makes a row that never
    reaches EOS. Ordinary tokens are 3 .. vocab - 1 (pad 0, bos 1, eos 2)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, vocab), generator=g)              # (batch, vocab) never EOS
    for b, length in enumerate(lengths):
        if length:
            path = (3 + torch.randperm(vocab - 3, generator=g))[:length - 1].tolist()
            chain = [BOS, *path, EOS]
            for here, there in zip(chain, chain[1:]):
                src[b, here] = there
    return {"src": src, "max_len": torch.tensor(max_len), "bos_id": torch.tensor(BOS), "eos_id": torch.tensor(EOS),
            "pad_id": torch.tensor(PAD)}


def model_inputs(seed: int, batch: int = 3, src_seq: int = 7, tgt_seq: int = 6, vocab: int = 13, max_len: int = 6,
                 norm_first: bool = False, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """A small chapter 06 Transformer's weights (vocab for both sides), src (batch, src_seq) padded, and a
    target tgt (batch, tgt_seq) that ends with EOS then padding (pad 0, bos 1, eos 2)."""
    inputs = _ch06.model_inputs(seed, batch=batch, src_seq=src_seq, tgt_seq=tgt_seq, src_vocab=vocab,
                                tgt_vocab=vocab, pad_id=PAD, norm_first=norm_first, dtype=dtype)
    g = torch.Generator().manual_seed(seed + 1)
    inputs["tgt"] = _targets(g, batch, tgt_seq, vocab, BOS, EOS, PAD)
    inputs.update({"max_len": torch.tensor(max_len), "bos_id": torch.tensor(BOS), "eos_id": torch.tensor(EOS)})
    return inputs
