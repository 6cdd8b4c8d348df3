"""Masked-language-model pretraining (BERT's recipe) for any encoder with ``encode(tokens, mask) -> hidden``.

    chunks = pretraining_chunks(pretraining_text().lines, vocab, max_len=128)
    for batch in mlm_batches(chunks, 64, vocab, seed=0, epoch=0):    # MLMBatch(inputs, targets, mask)
        loss = MaskedLM(encoder, len(vocab))(batch.inputs, batch.mask, batch.targets)

Masking (``mask_tokens``): each real character is chosen with probability 0.15; a chosen one becomes
``<mask>`` 80% of the time, a random character 10%, and stays itself 10%; the model must predict
every chosen character, and only those (``targets`` holds ``IGNORE_INDEX`` elsewhere). Specials
(``<pad>``, ``<unk>``, ``<cls>``, ``<mask>``) are never chosen and never drawn as the random character.
Which characters are chosen depends only on the generator, seeded from ``seed`` and ``epoch``: a
resumed run sees the same masks as a run never stopped.
"""
from __future__ import annotations

from typing import Collection, Iterable, Iterator, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..i18n import _
from .batching import batch_order, collate
from .vocab import CharVocab

IGNORE_INDEX = -100  # cross_entropy's default ignore_index: positions that are not predicted


class MLMBatch(NamedTuple):
    inputs: Tensor   # (batch, seq) long: the tokens after masking
    targets: Tensor  # (batch, seq) long: the original token where chosen, IGNORE_INDEX elsewhere
    mask: Tensor     # (batch, seq) bool: True on real tokens, False on padding


def mask_tokens(tokens: Tensor, mask_id: int, vocab_size: int, special_ids: Collection[int],
                generator: torch.Generator | None = None, prob: float = 0.15) -> tuple[Tensor, Tensor]:
    """Choose ~``prob`` of the non-special tokens; 80% -> ``mask_id``, 10% -> a random non-special, 10% kept.

    Args:
        tokens: (batch, seq) long, padded with a special id (``<pad>``).
        special_ids: ids never chosen and never drawn as replacements (padding included).
        generator: the source of every random choice (CPU); seed it for repeatable masks.

    Returns:
        ``(inputs, targets)``, both (batch, seq) long: ``inputs`` is a masked copy of ``tokens``;
        ``targets`` holds the original id at chosen positions and ``IGNORE_INDEX`` elsewhere.
    """
    specials = torch.tensor(sorted(special_ids), dtype=tokens.dtype, device=tokens.device)
    regular = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)], dtype=tokens.dtype)
    if len(regular) == 0:
        raise ValueError(_("mask_tokens needs at least one non-special id to draw replacements from"))
    chosen = (torch.rand(tokens.shape, generator=generator) < prob).to(tokens.device)      # (batch, seq)
    chosen &= ~torch.isin(tokens, specials)
    roll = torch.rand(tokens.shape, generator=generator).to(tokens.device)                 # (batch, seq)
    picks = regular[torch.randint(len(regular), tokens.shape, generator=generator)].to(tokens.device)
    inputs = torch.where(chosen & (roll < 0.8), torch.full_like(tokens, mask_id), tokens)
    inputs = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), picks, inputs)
    targets = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE_INDEX))
    return inputs, targets


def mlm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over the chosen positions; logits (..., vocab), targets (...) with IGNORE_INDEX.

    A batch with no chosen position gives 0 (with a gradient of zeros), not NaN.
    """
    flat_targets = targets.reshape(-1)                                   # (n,)
    if not bool((flat_targets != IGNORE_INDEX).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), flat_targets, ignore_index=IGNORE_INDEX)


class MaskedLM(nn.Module):
    """An encoder with a language-model head: predicts the original token at every position.

    ``encoder`` is any module with ``encode(tokens, mask) -> (batch, seq, d_model)`` and ``d_model``
    (every classifier of ``models``). The head is dense -> GELU -> LayerNorm -> linear to the vocabulary,
    whose weight can be tied to an embedding of shape (vocab_size, d_model) (``tied_weight``).
    """

    def __init__(self, encoder: nn.Module, vocab_size: int, tied_weight: nn.Parameter | None = None) -> None:
        super().__init__()
        self.encoder = encoder
        d_model = int(encoder.d_model)
        self.transform = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model))
        self.decoder = nn.Linear(d_model, vocab_size)
        if tied_weight is not None:
            if tuple(tied_weight.shape) != (vocab_size, d_model):
                raise ValueError(_("a tied LM head needs a weight of shape {wanted}, not {got}").format(
                    wanted=(vocab_size, d_model), got=tuple(tied_weight.shape)))
            self.decoder.weight = tied_weight

    def forward(self, tokens: Tensor, mask: Tensor, targets: Tensor | None = None) -> Tensor:
        """Logits (batch, seq, vocab_size) for every position; with ``targets``, the ``mlm_loss`` instead.

        With targets the head runs only at the chosen positions (its vocabulary-wide matrix is the
        costly part). The loss comes from ``forward`` so that DistributedDataParallel sees the call.
        """
        if targets is None:
            return self.decoder(self.transform(self.encoder.encode(tokens, mask)))  # (batch, seq, vocab_size)
        return mlm_loss(self.chosen_logits(tokens, mask, targets), targets[targets != IGNORE_INDEX])

    def chosen_logits(self, tokens: Tensor, mask: Tensor, targets: Tensor) -> Tensor:
        """Logits (chosen, vocab_size) at the positions where ``targets`` is not IGNORE_INDEX, in row order."""
        hidden = self.encoder.encode(tokens, mask)                      # (batch, seq, d_model)
        return self.decoder(self.transform(hidden[targets != IGNORE_INDEX]))  # (chosen, vocab_size)


def pretraining_chunks(lines: Iterable[str], vocab: CharVocab, max_len: int) -> list[list[int]]:
    """Each line encoded, and cut into pieces of at most ``max_len`` ids (pieces under 2 ids dropped)."""
    chunks = []
    for line in lines:
        ids = vocab.encode(line)
        chunks += [ids[start: start + max_len] for start in range(0, len(ids), max_len)
                   if len(ids[start: start + max_len]) >= 2]
    return chunks


def mlm_batches(chunks: Sequence[list[int]], batch_size: int, vocab: CharVocab, seed: int = 0, epoch: int = 0,
                groups: Sequence[Sequence[int]] | None = None, prob: float = 0.15) -> Iterator[MLMBatch]:
    """Bucketed, padded, masked batches of ``chunks``; the same for the same ``seed`` and ``epoch``.

    ``groups`` (indices of each batch) replaces the default ``batch_order`` (a rank's shard, say).
    """
    if groups is None:
        groups = batch_order([len(c) for c in chunks], batch_size, seed=seed, epoch=epoch)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    for group in groups:
        tokens = collate([(chunks[i], 0) for i in group], vocab.pad_id).tokens       # (batch, seq)
        inputs, targets = mask_tokens(tokens, vocab.mask_id, len(vocab), vocab.special_ids, generator, prob)
        yield MLMBatch(inputs, targets, tokens != vocab.pad_id)
