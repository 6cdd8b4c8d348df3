"""Chapter 07 — Training a sequence-to-sequence Transformer, and using it: the four pieces around the model.

    target  y = [y1 y2 ... yn EOS pad pad]            what the decoder must predict (the labels)
    input     = [BOS y1 ... yn-1 yn  pad pad]         shift_right(y): what the decoder reads (teacher forcing)
    loss      = LabelSmoothingLoss(logits, y)         smoothed cross-entropy over the real (non-pad) labels
    lr(step)  = lr * noam_schedule(step, d_model)     the paper's warmup, as the harness's ``schedule``
    translate = greedy_decode(model, src, ...)        one token at a time, until EOS

The file is called ``seq2seq.py`` (not ``training.py``: that is the provided training loop,
``course_lib.provided.training``, which these pieces plug into). Token ids are int64; a sequence is
padded at the end with ``pad_id``; a target ends with ``eos_id`` before its padding.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .masks import padding_mask, target_mask


def shift_right(tgt: Tensor, bos_id: int, pad_id: int) -> Tensor:
    """The decoder's input for teacher forcing: BOS, then the target without its last position.

    Args:
        tgt: (batch, seq) int64 labels, each ``y1 .. yn EOS`` then ``pad_id`` up to ``seq``.
        bos_id, pad_id: the ids of the start token and of padding.

    Returns:
        (batch, seq) int64: ``out[:, 0] = bos_id`` and ``out[:, t] = tgt[:, t - 1]``, except that ``out`` is
        ``pad_id`` wherever ``tgt`` is ``pad_id``. So position t reads y1 .. y_t-1 (after BOS) and is trained
        to predict y_t; the EOS of a padded row is never read (its position's label is padding), and
        the last label of a full row (its EOS) is predicted but never read. The input is padded exactly
        where the labels are, so ``target_mask(shift_right(...))`` and the loss ignore the same positions.
        Where the label is padding the input is yours to choose (``torch.cat([bos, tgt], 1)[:, :-1]``, which
        leaves the EOS there, is as right): the loss skips those positions and, under the causal mask, no
        position with a real label reads them, so no loss or gradient changes; the checks grade the rest.

    Example:
    >>> import torch
    >>> shift_right(torch.tensor([[5, 6, 2, 0], [7, 8, 9, 2]]), bos_id=1, pad_id=0)
    tensor([[1, 5, 6, 0],
            [1, 7, 8, 9]])
    """
    ### BEGIN SOLUTION
    bos = torch.full_like(tgt[:, :1], bos_id)  # (batch, 1)
    shifted = torch.cat([bos, tgt[:, :-1]], dim=1)  # (batch, seq)
    return shifted.masked_fill(tgt == pad_id, pad_id)  # (batch, seq) padded where the labels are
    ### END SOLUTION


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against label-smoothed targets (section 5.4, eps_ls = 0.1), ignoring padding.

    The target distribution q of a real label y (Szegedy et al.'s uniform smoothing, spread over every token
    but padding, V - 1 of them; BOS is one of them although it is never a label, as chapter 07 says: its share
    is a little probability on a token that is never right, and it changes nothing else):
        q(y) = 1 - eps + eps / (V - 1),   q(k) = eps / (V - 1) for k != y, k != pad,   q(pad) = 0.
    The loss of a position is -sum_k q(k) log p(k), with p = softmax(logits); positions whose label is
    ``pad_id`` count for nothing; the result is the mean over the real labels (0, still differentiable,
    when there are none). With eps = 0 it is the plain cross-entropy. It differs from the KL divergence
    KL(q || p) (The Annotated Transformer's choice) by the entropy of q, a constant: same gradients.

    Args:
        vocab_size: V, the number of target token ids (the last axis of the logits).
        pad_id: the padding id: never a label, never given smoothing mass.
        smoothing: eps, the probability mass moved away from the true label.

    forward(logits, target): logits (batch, seq, V) float, target (batch, seq) int64 -> a scalar of
        logits' dtype.
    target_distribution(target): target (...) int64 -> q (..., V) float32 (all zeros at padded labels).

    Example:
    >>> import torch
    >>> loss = LabelSmoothingLoss(vocab_size=5, pad_id=0, smoothing=0.2)
    >>> loss.target_distribution(torch.tensor([3, 0]))
    tensor([[0.0000, 0.0500, 0.0500, 0.8500, 0.0500],
            [0.0000, 0.0000, 0.0000, 0.0000, 0.0000]])
    """

    def __init__(self, vocab_size: int, pad_id: int, smoothing: float = 0.1) -> None:
        super().__init__()
        self.vocab_size, self.pad_id, self.smoothing = vocab_size, pad_id, smoothing

    def target_distribution(self, target: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
        """q (..., V) in ``dtype`` for labels ``target`` (...): see the class docstring."""
        ### BEGIN SOLUTION
        q = torch.full((*target.shape, self.vocab_size), self.smoothing / (self.vocab_size - 1),
                       dtype=dtype, device=target.device)  # (..., V) eps spread evenly
        q[..., self.pad_id] = 0.0  # (..., V) no mass on padding
        q.scatter_add_(-1, target.unsqueeze(-1),  # (..., 1) the true label gets 1 - eps more
                       torch.full_like(q[..., :1], 1.0 - self.smoothing))
        return q.masked_fill((target == self.pad_id).unsqueeze(-1), 0.0)  # (..., V) padded labels: all 0
        ### END SOLUTION

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        """The mean smoothed cross-entropy over the real labels: logits (batch, seq, V), target (batch, seq)."""
        ### BEGIN SOLUTION
        log_p = logits.log_softmax(dim=-1)  # (batch, seq, V)
        q = self.target_distribution(target, log_p.dtype)  # (batch, seq, V)
        per_token = -(q * log_p).sum(dim=-1)  # (batch, seq), 0 at padded labels
        real = (target != self.pad_id).sum()  # () how many labels count
        return per_token.sum() / real.clamp(min=1)  # () mean over real labels, 0 when there are none
        ### END SOLUTION


def noam_schedule(step: int, d_model: int, warmup: int = 4000) -> float:
    """The paper's learning rate (section 5.3): d_model^-0.5 * min(n^-0.5, n * warmup^-1.5), n counted from 1.

    ``step`` counts optimizer steps from 0, the way the harness (``torch.optim.lr_scheduler.LambdaLR``)
    passes it: step 0 is the first update, the paper's step n = 1, so the rate is never 0. It rises linearly for
    ``warmup`` steps to its peak (d_model * warmup)^-0.5, then falls as n^-0.5. Use it as the harness's
    ``schedule`` with ``TrainConfig(lr=1.0)``: ``functools.partial(noam_schedule, d_model=..., warmup=...)``.

    Example:
    >>> import torch
    >>> round(noam_schedule(3999, d_model=512), 6)          # the peak, 512^-0.5 * 4000^-0.5
    0.000699
    """
    ### BEGIN SOLUTION
    n = step + 1  # the formula needs n >= 1 (the paper does not say how it counts)
    return d_model ** -0.5 * min(n ** -0.5, n * warmup ** -1.5)
    ### END SOLUTION


@torch.no_grad()
def greedy_decode(model: nn.Module, src: Tensor, max_len: int, bos_id: int, eos_id: int, pad_id: int) -> Tensor:
    """Translate ``src`` one token at a time, always taking the most likely next token, until EOS.

    Args:
        model: a chapter 06 ``Transformer`` (anything with ``encode``, ``decode`` and ``generator``), in
            evaluation mode (call ``model.eval()`` first: dropout would make the output random).
        src: (batch, src_seq) int64 source tokens, padded with ``pad_id``.
        max_len: the most tokens generated per sequence (EOS included; BOS not counted).

    Returns:
        (batch, steps) int64, steps <= max_len: the generated tokens without BOS. A sequence ends with its
        first EOS (kept), then ``pad_id`` up to ``steps``; decoding stops once every sequence has an EOS,
        or after ``max_len`` tokens. The source is encoded once; each step decodes the whole prefix.

    Example: with a model that translates [[7, 8, 2]] to "9 4 EOS" (eos_id 2),
        greedy_decode(model, src, max_len=10, bos_id=1, eos_id=2, pad_id=0) -> tensor([[9, 4, 2]]).
    """
    ### BEGIN SOLUTION
    source_mask = padding_mask(src, pad_id)  # (batch, 1, 1, src_seq)
    memory = model.encode(src, source_mask)  # (batch, src_seq, d_model) computed once
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (batch, 1) BOS
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (batch,)
    for _ in range(max_len):
        hidden = model.decode(ys, memory, source_mask, target_mask(ys, pad_id))  # (batch, len, d_model)
        next_token = model.generator(hidden[:, -1]).argmax(dim=-1)  # (batch,) the most likely token
        next_token = next_token.masked_fill(done, pad_id)  # (batch,) finished sequences get padding
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # (batch, len + 1)
        done = done | (next_token == eos_id)  # (batch,)
        if bool(done.all()):
            break
    return ys[:, 1:]  # (batch, steps) without BOS
    ### END SOLUTION
