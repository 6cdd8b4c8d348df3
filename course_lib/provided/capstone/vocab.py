"""A character vocabulary for Chinese reviews: every character is a token.

Chinese needs no word segmentation for this: the 3,648 characters seen at least twice in the train
reviews cover 99.8% of the characters of valid and test.

    vocab = CharVocab.build(review.text for review in reviews().train)   # min_freq=2 by default
    ids = vocab.encode("质量很好", add_cls=True)   # [cls_id, id(质), id(量), id(很), id(好)]
    vocab.decode(ids)                             # "质量很好" (specials skipped)
    vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.mask_id   # 0, 1, 2, 3
    vocab.save("vocab.json"); CharVocab.load("vocab.json")

The specials come first, in this order: ``<pad>`` = 0 (padding: the batches fill with it, the masks
exclude it), ``<unk>`` = 1 (a character not in the vocabulary), ``<cls>`` = 2 (an optional first token
whose output can stand for the whole review), ``<mask>`` = 3 (masked-language-model pretraining
replaces characters with it). No ``<bos>``/``<eos>``: a classifier and a masked language model
generate nothing. Build the vocabulary from the train split only, so that valid and test characters
that train never saw become ``<unk>``, as they would for a new review.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from ..i18n import _

PAD, UNK, CLS, MASK = "<pad>", "<unk>", "<cls>", "<mask>"
SPECIALS: tuple[str, ...] = (PAD, UNK, CLS, MASK)


class CharVocab:
    """Characters <-> ids; ids 0-3 are the specials ``<pad>``, ``<unk>``, ``<cls>``, ``<mask>``."""

    def __init__(self, chars: Sequence[str]) -> None:
        """A vocabulary of the specials followed by ``chars`` (single characters, no repeats), in order."""
        bad = [c for c in chars if len(c) != 1]
        if bad:
            raise ValueError(_("a CharVocab holds single characters, not {found}").format(found=bad[:3]))
        if len(set(chars)) != len(chars):
            raise ValueError(_("a CharVocab lists each character once"))
        self._itos: tuple[str, ...] = SPECIALS + tuple(chars)
        self._stoi: dict[str, int] = {token: i for i, token in enumerate(self._itos)}

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = 2, max_size: int | None = None) -> CharVocab:
        """The characters of ``texts`` seen at least ``min_freq`` times, most frequent first.

        ``max_size`` bounds the whole vocabulary, specials included (keeping the most frequent).
        Ties are broken by the character itself, so the same texts always give the same ids.
        """
        if min_freq < 1:
            raise ValueError(_("min_freq must be at least 1, not {value}").format(value=min_freq))
        if max_size is not None and max_size < len(SPECIALS):
            raise ValueError(_("max_size must leave room for the {count} specials, not {value}").format(
                count=len(SPECIALS), value=max_size))
        counts = Counter(char for text in texts for char in text)
        ranked = sorted((c for c, n in counts.items() if n >= min_freq), key=lambda c: (-counts[c], c))
        if max_size is not None:
            ranked = ranked[: max_size - len(SPECIALS)]
        return cls(ranked)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: str) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharVocab) and self._itos == other._itos

    def __repr__(self) -> str:
        return f"CharVocab({len(self)} tokens: {len(SPECIALS)} specials + {len(self) - len(SPECIALS)} characters)"

    @property
    def tokens(self) -> tuple[str, ...]:
        """Every token, by id: the specials, then the characters."""
        return self._itos

    @property
    def pad_id(self) -> int:
        return self._stoi[PAD]

    @property
    def unk_id(self) -> int:
        return self._stoi[UNK]

    @property
    def cls_id(self) -> int:
        return self._stoi[CLS]

    @property
    def mask_id(self) -> int:
        return self._stoi[MASK]

    @property
    def special_ids(self) -> frozenset[int]:
        return frozenset(range(len(SPECIALS)))

    def encode(self, text: str, add_cls: bool = False, max_len: int | None = None) -> list[int]:
        """Ids of the characters of ``text`` (``<unk>`` for unknown ones), ``<cls>`` first if asked.

        ``max_len`` keeps the first ``max_len`` ids (``<cls>`` included).
        """
        ids = [self.cls_id] if add_cls else []
        ids += [self._stoi.get(char, self.unk_id) for char in text]
        return ids if max_len is None else ids[:max_len]

    def decode(self, ids: Iterable[int], skip_specials: bool = True) -> str:
        """The text of ``ids``; specials are skipped, or written as ``<unk>`` etc. with ``skip_specials=False``."""
        specials = self.special_ids
        return "".join(self._itos[i] for i in map(int, ids) if not (skip_specials and i in specials))

    def coverage(self, texts: Iterable[str]) -> float:
        """The fraction of the characters of ``texts`` that the vocabulary knows (not ``<unk>``)."""
        counts = Counter(char for text in texts for char in text)
        total = sum(counts.values())
        return sum(n for c, n in counts.items() if c in self._stoi) / total if total else 1.0

    def save(self, path: str | Path) -> None:
        """Write the vocabulary as JSON: ``{"specials": [...], "chars": [...]}`` (UTF-8, readable)."""
        data = {"specials": list(SPECIALS), "chars": list(self._itos[len(SPECIALS):])}
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=0), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> CharVocab:
        """The vocabulary ``save`` wrote; refuses a file whose specials differ from these."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if tuple(data.get("specials", ())) != SPECIALS:
            raise ValueError(_("{path}: specials {found} differ from {wanted}").format(
                path=path, found=data.get("specials"), wanted=list(SPECIALS)))
        return cls(data["chars"])


def bigram_keys(texts: Iterable[str], vocab: CharVocab, min_freq: int = 2) -> list[int]:
    """The character pairs of ``texts`` seen at least ``min_freq`` times, each coded ``first * len(vocab) + second``
    (ids of ``vocab``; a text's first character pairs with ``<pad>``), sorted: ``models.BigramInput``'s keys."""
    size, counts = len(vocab), Counter()
    for text in texts:
        ids = [vocab.pad_id] + vocab.encode(text)
        counts.update(a * size + b for a, b in zip(ids, ids[1:]))
    return sorted(code for code, n in counts.items() if n >= min_freq)
