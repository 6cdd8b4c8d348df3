"""Encoded reviews into padded batches, with length bucketing so that little of a batch is padding.

A batch is as long as its longest review; the shorter ones are filled with ``pad_id`` up to that
length. Reviews range from 1 to 2,900 characters (median 45), so batches of random reviews are
mostly padding, which the model computes on and then masks out. Bucketing puts reviews of similar
length together: shuffle, cut into chunks of a few batches, sort each chunk by length, cut it into
batches, shuffle the batches. The order stays random from batch to batch, and repeatable: it depends
only on ``seed`` and ``epoch``.

    data = encode_reviews(reviews().train, vocab, max_len=256)     # [(ids, label), ...]
    for batch in batches(data, batch_size=64, pad_id=vocab.pad_id, seed=0, epoch=0):
        batch.tokens   # (batch, seq) long, pad_id after each review's end
        batch.labels   # (batch,) long
        batch.lengths  # (batch,) long, real tokens per row

    # the same batches from a torch DataLoader (workers, pinned memory, ...):
    loader = make_loader(data, batch_size=64, pad_id=vocab.pad_id, seed=0)
    loader.batch_sampler.set_epoch(epoch)   # a new order each epoch
"""
from __future__ import annotations

import random
from functools import partial
from typing import Iterable, Iterator, NamedTuple, Sequence

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..i18n import _
from .data import Review
from .vocab import CharVocab

Example = tuple[list[int], int]  # (token ids, label)


class Batch(NamedTuple):
    tokens: torch.Tensor   # (batch, seq) long, padded with pad_id on the right
    labels: torch.Tensor   # (batch,) long, 0 negative, 1 positive
    lengths: torch.Tensor  # (batch,) long, tokens before the padding starts


def encode_reviews(reviews: Iterable[Review], vocab: CharVocab, max_len: int | None = None,
                   add_cls: bool = False) -> list[Example]:
    """Each review as (ids, label), truncated to ``max_len`` ids; an empty text keeps one ``<unk>``."""
    encoded = []
    for review in reviews:
        ids = vocab.encode(review.text, add_cls=add_cls, max_len=max_len) or [vocab.unk_id]
        encoded.append((ids, review.label))
    return encoded


def collate(examples: Sequence[Example], pad_id: int, max_len: int | None = None) -> Batch:
    """Pad ``examples`` to the longest of them (at most ``max_len``) with ``pad_id``; keep the lengths."""
    if not examples:
        raise ValueError(_("collate needs at least one example"))
    rows = [ids if max_len is None else ids[:max_len] for ids, _ in examples]
    lengths = torch.tensor([len(ids) for ids in rows], dtype=torch.long)     # (batch,)
    tokens = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)  # (batch, seq)
    for row, ids in enumerate(rows):
        tokens[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    labels = torch.tensor([label for _, label in examples], dtype=torch.long)  # (batch,)
    return Batch(tokens, labels, lengths)


def batch_order(lengths: Sequence[int], batch_size: int, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                bucket: bool = True, chunk_batches: int = 50, drop_last: bool = False) -> list[list[int]]:
    """The indices of each batch, in the order to visit them.

    ``shuffle`` and ``bucket``: chunks of ``chunk_batches`` batches sorted by length (see above).
    ``shuffle`` alone: random batches. ``bucket`` alone (evaluation): the whole set sorted by length,
    the least padding possible. Neither: the given order. Random choices come from ``seed`` and
    ``epoch`` only. ``drop_last`` leaves out a last batch smaller than ``batch_size``.
    """
    if batch_size < 1 or chunk_batches < 1:
        raise ValueError(_("batch_size and chunk_batches must be positive, not {batch_size}, {chunk_batches}").format(
            batch_size=batch_size, chunk_batches=chunk_batches))
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    chunk = batch_size * chunk_batches if shuffle else max(len(order), 1)
    if bucket:
        order = [i for start in range(0, len(order), chunk)
                 for i in sorted(order[start: start + chunk], key=lambda i: lengths[i])]
    groups = [order[start: start + batch_size] for start in range(0, len(order), batch_size)]
    if drop_last and groups and len(groups[-1]) < batch_size:
        groups.pop()
    if shuffle:
        rng.shuffle(groups)
    return groups


class ReviewDataset(Dataset):
    """Encoded reviews for a torch DataLoader: item ``i`` is ``(ids, label)``."""

    def __init__(self, examples: Sequence[Example]) -> None:
        self.examples = list(examples)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> Example:
        return self.examples[index]

    def lengths(self) -> list[int]:
        return [len(ids) for ids, _ in self.examples]


class BucketBatchSampler(Sampler[list[int]]):
    """``batch_order`` as a DataLoader's ``batch_sampler``; call ``set_epoch`` before each epoch."""

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, shuffle: bool = True,
                 bucket: bool = True, chunk_batches: int = 50, drop_last: bool = False) -> None:
        self.lengths = list(lengths)
        self.options = dict(batch_size=batch_size, seed=seed, shuffle=shuffle, bucket=bucket,
                            chunk_batches=chunk_batches, drop_last=drop_last)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        return iter(batch_order(self.lengths, epoch=self.epoch, **self.options))

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.options["batch_size"])
        return full + (rest > 0 and not self.options["drop_last"])


def batches(examples: Sequence[Example], batch_size: int, pad_id: int, max_len: int | None = None,
            seed: int = 0, epoch: int = 0, shuffle: bool = True, bucket: bool = True,
            chunk_batches: int = 50, drop_last: bool = False) -> Iterator[Batch]:
    """The batches of ``examples``, padded, in ``batch_order`` (a plain iterator; no DataLoader)."""
    lengths = [len(ids) if max_len is None else min(len(ids), max_len) for ids, _ in examples]
    for group in batch_order(lengths, batch_size, seed, epoch, shuffle, bucket, chunk_batches, drop_last):
        yield collate([examples[i] for i in group], pad_id, max_len)


def make_loader(examples: Sequence[Example], batch_size: int, pad_id: int, max_len: int | None = None,
                seed: int = 0, shuffle: bool = True, bucket: bool = True, chunk_batches: int = 50,
                drop_last: bool = False, **loader_options: object) -> DataLoader:
    """A DataLoader giving the same batches as ``batches`` (epoch 0; ``loader.batch_sampler.set_epoch``)."""
    dataset = ReviewDataset(
        [(ids if max_len is None else ids[:max_len], label) for ids, label in examples])
    sampler = BucketBatchSampler(dataset.lengths(), batch_size, seed, shuffle, bucket, chunk_batches, drop_last)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=partial(collate, pad_id=pad_id),
                      **loader_options)  # type: ignore[arg-type]


def padding_fraction(batches: Iterable[Batch]) -> float:
    """The share of all batch positions that are padding: 1 - real tokens / (batch x seq), summed."""
    real = total = 0
    for batch in batches:
        real += int(batch.lengths.sum())
        total += batch.tokens.numel()
    return 1 - real / total if total else 0.0
