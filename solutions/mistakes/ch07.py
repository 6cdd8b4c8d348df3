"""Known-wrong variants of chapter 07, keyed like MISTAKES in tests/specs/ch07.py.

Each is the reference with one mistake planted: a target fed to the decoder unshifted, smoothing mass on
the padding column, a loss averaged over padding too, a schedule that is 0 at step 0 or lacks the
d_model^-0.5 factor, and greedy decoding that runs past EOS. The variants call the reference's masks.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from course_ref import seq2seq as ref
from course_ref.masks import padding_mask, target_mask


def not_shifted(tgt: Tensor, bos_id: int, pad_id: int) -> Tensor:
    return tgt.clone()  # the decoder reads the labels themselves


class SmoothingOnPadding(ref.LabelSmoothingLoss):
    """eps spread evenly over all V columns, padding included (what F.cross_entropy(label_smoothing=) does)."""

    def target_distribution(self, target: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        q = torch.full((*target.shape, self.vocab_size), self.smoothing / self.vocab_size, dtype=dtype)
        q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(q[..., :1], 1.0 - self.smoothing))
        return q.masked_fill((target == self.pad_id).unsqueeze(-1), 0.0)


class PaddingCounted(ref.LabelSmoothingLoss):
    """The per-token losses averaged over every position, padded ones included."""

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        log_p = logits.log_softmax(dim=-1)
        return -(self.target_distribution(target, log_p.dtype) * log_p).sum(dim=-1).mean()


class KullbackLeibler(ref.LabelSmoothingLoss):
    """KL(q || p) = sum q (log q - log p) per real label (The Annotated Transformer's KLDivLoss), averaged."""

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        log_p = logits.log_softmax(dim=-1)
        q = self.target_distribution(target, log_p.dtype)
        per_token = torch.xlogy(q, q).sum(-1) - (q * log_p).sum(-1)
        return per_token.sum() / (target != self.pad_id).sum().clamp(min=1)


def schedule_from_zero(step: int, d_model: int, warmup: int = 4000) -> float:
    """The paper's formula with the harness's step 0 as the paper's step: 0 at the first update."""
    return d_model ** -0.5 * min(step ** -0.5 if step else math.inf, step * warmup ** -1.5)


def schedule_without_scale(step: int, d_model: int, warmup: int = 4000) -> float:
    n = step + 1
    return min(n ** -0.5, n * warmup ** -1.5)


def decode_until(stop: Callable[[Tensor, int], bool]) -> Callable:
    """A greedy_decode that never pads after EOS and stops when ``stop(ys, eos_id)`` (or at max_len)."""
    @torch.no_grad()
    def greedy_decode(model, src: Tensor, max_len: int, bos_id: int, eos_id: int, pad_id: int) -> Tensor:
        src_mask = padding_mask(src, pad_id)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            hidden = model.decode(ys, memory, src_mask, target_mask(ys, pad_id))
            ys = torch.cat([ys, model.generator(hidden[:, -1]).argmax(dim=-1)[:, None]], dim=1)
            if stop(ys, eos_id):
                break
        return ys[:, 1:]
    return greedy_decode


decode_past_eos = decode_until(lambda ys, eos: False)  # always max_len tokens, EOS treated like any other
decode_until_first_eos = decode_until(lambda ys, eos: int(ys[0, -1]) == eos)  # the first sequence stops all


VARIANTS: dict[str, dict[str, Callable]] = {
    "targets_not_shifted": {"seq2seq.shift_right": not_shifted},
    "smoothing_on_padding": {"seq2seq.LabelSmoothingLoss": SmoothingOnPadding},
    "padding_counted": {"seq2seq.LabelSmoothingLoss": PaddingCounted},
    "schedule_zero_at_start": {"seq2seq.noam_schedule": schedule_from_zero},
    "schedule_without_scale": {"seq2seq.noam_schedule": schedule_without_scale},
    "decode_ignores_eos": {"seq2seq.greedy_decode": decode_past_eos},
    "kl_instead_of_cross_entropy": {"seq2seq.LabelSmoothingLoss": KullbackLeibler},
    "decode_stops_at_first_eos": {"seq2seq.greedy_decode": decode_until_first_eos},
}
