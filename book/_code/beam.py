"""Beam search for a chapter 06 ``Transformer``: the decoding the paper translates with (section 6.1:
beam size 4, length penalty alpha = 0.6). The book's own code for chapter 07's section on beam search,
shown there and tested in solutions/tests/book/test_beam_search.py. It is not part of ``course_lib``: a beam of
one is greedy decoding, which chapter 07 asks learners to write themselves.

Greedy decoding keeps one prefix and takes the most likely next token. Beam search keeps the ``beam_size``
most likely prefixes (hypotheses) of each sentence: at every step it extends each of them by every token
of the vocabulary and keeps the best ``beam_size`` of those ``beam_size * V`` candidates, ranked by their
log-probability, the sum of their tokens' log-probabilities. A hypothesis that wrote EOS is finished: it
stays in the beam, extended only by padding at no cost, until better ones push it out. At the end each
sentence returns the hypothesis with the best *normalised* score (the penalty's form is Wu et al.
2016's; the paper set alpha = 0.6 and the beam size on its development set):

    score(Y) = log p(Y | X) / lp(Y),     lp(Y) = ((5 + |Y|) / 6) ** alpha

The penalty enters only that final choice: during the search hypotheses are ranked by raw
log-probability, finished ones included, whereas Wu et al. and tensor2tensor rank by the normalised
score throughout, so a short finished hypothesis here keeps its place by raw score. On outputs of one
length (chapter 07's dates) the two rankings agree.

|Y| counts the tokens written, EOS included. Without it (alpha = 0) a sum of negative log-probabilities
favours short outputs. Beam size 1 is greedy decoding, token for token (tested).

Masks follow the course's convention (``masks.py``): True = attend. Every step decodes the whole prefix
again, like ``greedy_decode``: simple, and the same model calls, so it runs on any chapter 06
``Transformer``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


def length_penalty(length: Tensor, alpha: float) -> Tensor:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha, elementwise on a float tensor of lengths; 1 when alpha is 0."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: nn.Module, src: Tensor, max_len: int, bos_id: int, eos_id: int, pad_id: int,
                beam_size: int = 4, alpha: float = 0.6) -> Tensor:
    """Translate ``src`` keeping the ``beam_size`` best hypotheses of each sentence (see the module).

    Args:
        model: a chapter 06 ``Transformer`` (``encode``, ``decode``, ``generator``) in evaluation mode.
        src: (batch, src_seq) int64 source tokens, padded with ``pad_id``.
        max_len: the most tokens written per sentence (EOS included; BOS not counted).
        beam_size: hypotheses kept per sentence (1: greedy decoding).
        alpha: the length penalty's exponent (0: plain log-probability).

    Returns:
        (batch, steps) int64, steps <= max_len, like ``greedy_decode``: each sentence's best hypothesis
        without BOS, its first EOS kept, then ``pad_id``.
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(f"beam_search: beam_size and max_len must be at least 1, not {beam_size} and {max_len}")
    batch, k = src.size(0), beam_size
    src_mask = (src != pad_id)[:, None, None, :]                               # (batch, 1, 1, src_seq)
    memory = model.encode(src, src_mask)                                       # (batch, src_seq, d_model)
    memory, src_mask = memory.repeat_interleave(k, 0), src_mask.repeat_interleave(k, 0)  # (batch * k, ...)
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=src.device)  # (batch * k, 1): BOS
    scores = torch.zeros(batch, k, device=src.device)                          # (batch, k) log p(prefix)
    scores[:, 1:] = float("-inf")            # the k prefixes start equal: only the first may be extended
    done = torch.zeros(batch * k, dtype=torch.bool, device=src.device)         # (batch * k,)
    first = torch.arange(batch, device=src.device)[:, None] * k                # (batch, 1) each sentence's row 0
    while ys.size(1) <= max_len:                                               # BOS + at most max_len tokens
        n = ys.size(1)
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool, device=src.device))  # (n, n)
        tgt_mask = (ys != pad_id)[:, None, None, :] & causal                    # (batch * k, 1, n, n)
        hidden = model.decode(ys, memory, src_mask, tgt_mask)                  # (batch * k, n, d_model)
        logp = model.generator(hidden[:, -1]).float().log_softmax(dim=-1)      # (batch * k, V)
        logp[done] = float("-inf")                                             # a finished hypothesis...
        logp[done, pad_id] = 0.0                                               # ...only takes padding, free
        vocab = logp.size(-1)
        candidates = (scores.reshape(-1, 1) + logp).reshape(batch, k * vocab)  # (batch, k * V)
        scores, index = candidates.topk(k, dim=-1)                             # (batch, k) best first
        rows = (first + torch.div(index, vocab, rounding_mode="floor")).reshape(-1)  # (batch * k,) extended
        token = (index % vocab).reshape(-1, 1)                                 # (batch * k, 1)
        ys = torch.cat([ys[rows], token], dim=1)                               # (batch * k, n + 1)
        done = done[rows] | (token[:, 0] == eos_id)
        if done.all().item():                                                  # every hypothesis has its EOS
            break
    written = (ys[:, 1:] != pad_id).sum(dim=1).float().reshape(batch, k)       # (batch, k) |Y|
    best = (scores / length_penalty(written, alpha)).argmax(dim=-1)            # (batch,)
    out = ys[first[:, 0] + best, 1:]                                           # (batch, steps)
    if k > 1 and bool((out != pad_id).any()):  # others ran on after the chosen ones ended: cut their padding
        out = out[:, : int((out != pad_id).any(dim=0).nonzero().max()) + 1]    # (batch, steps)
    return out
