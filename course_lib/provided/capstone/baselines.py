"""The bars a Transformer must clear on the review corpus: three classic classifiers, in seconds.

    python -m course_lib.provided.capstone.baselines        # prints the table below

- majority class: always the label most frequent in train (negative); the floor.
- naive Bayes: counts of character 1-3-grams, multinomial naive Bayes (alpha 0.1).
- TF-IDF + logistic regression: character 1-3-grams seen in at least 2 train reviews, sublinear TF-IDF,
  L2-regularised logistic regression (C = 3). The bar of the capstone.

Each is fitted on the train split only; its hyperparameters (alpha; min_df, sublinear TF and C) were
chosen on the valid split, never on test. Characters, not words: no segmenter is needed, and
1-3-grams of characters cover most Chinese words.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.dummy import DummyClassifier
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline, make_pipeline

from ..i18n import N_, _
from .data import Corpus, Review, reviews

# The names are keys (baselines.json, record_runs); shown, they are translated (report.comparison_table, format_table)
MAJORITY, NAIVE_BAYES, TFIDF_LR = N_("majority class"), N_("naive Bayes (char 1-3)"), N_("TF-IDF (char 1-3) + LR")


def _majority() -> Pipeline:
    return make_pipeline(DummyClassifier(strategy="most_frequent"))


def _naive_bayes() -> Pipeline:
    return make_pipeline(CountVectorizer(analyzer="char", ngram_range=(1, 3)), MultinomialNB(alpha=0.1))


def _tfidf_lr() -> Pipeline:
    return make_pipeline(
        TfidfVectorizer(analyzer="char", ngram_range=(1, 3), min_df=2, sublinear_tf=True),
        LogisticRegression(C=3.0, max_iter=2000))


BASELINES: dict[str, Callable[[], Pipeline]] = {MAJORITY: _majority, NAIVE_BAYES: _naive_bayes,
                                                TFIDF_LR: _tfidf_lr}


@dataclass(frozen=True)
class BaselineResult:
    """One baseline's accuracy on valid and test, and the seconds it took to fit and predict both."""
    name: str
    valid_accuracy: float
    test_accuracy: float
    seconds: float


def _xy(split: Sequence[Review]) -> tuple[list[str], np.ndarray]:
    return [review.text for review in split], np.array([review.label for review in split])


def fit(name: str, train: Sequence[Review]) -> Pipeline:
    """The baseline ``name`` (a key of ``BASELINES``) fitted on ``train``; ``.predict(texts)`` gives labels."""
    if name not in BASELINES:
        raise ValueError(_("unknown baseline {name}; choose one of {names}").format(name=repr(name),
                                                                                    names=list(BASELINES)))
    texts, labels = _xy(train)
    return BASELINES[name]().fit(texts, labels)


def accuracy(model: ClassifierMixin | Pipeline, split: Sequence[Review]) -> float:
    """The fraction of ``split`` that ``model`` labels right."""
    texts, labels = _xy(split)
    return float(np.mean(model.predict(texts) == labels))


def run_baselines(corpus: Corpus | None = None, names: Sequence[str] | None = None) -> list[BaselineResult]:
    """Fit each baseline (all by default) on train; its valid and test accuracy and wall time."""
    corpus = corpus or reviews()
    results = []
    for name in names or list(BASELINES):
        start = time.perf_counter()
        model = fit(name, corpus.train)
        valid, test = accuracy(model, corpus.valid), accuracy(model, corpus.test)
        results.append(BaselineResult(name, valid, test, time.perf_counter() - start))
    return results


def format_table(results: Sequence[BaselineResult], corpus: Corpus | None = None) -> str:
    """The results as a Markdown table, with the split sizes above it when ``corpus`` is given."""
    lines = []
    if corpus is not None:
        lines.append(_("train {train:,} / valid {valid:,} / test {test:,} reviews").format(
            train=len(corpus.train), valid=len(corpus.valid), test=len(corpus.test)) + "\n")
    lines += [f"| {_('baseline')} | {_('valid acc')} | {_('test acc')} | {_('seconds')} |", "|---|---:|---:|---:|"]
    lines += [f"| {_(r.name)} | {r.valid_accuracy:.1%} | {r.test_accuracy:.1%} | {r.seconds:.1f} |" for r in results]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.provided.capstone.baselines",
                                     description=_("Fit the capstone's baselines on train; print valid and test "
                                                   "accuracy."))
    parser.add_argument("--only", choices=list(BASELINES), action="append",
                        help=_("run only this baseline (repeatable)"))
    args = parser.parse_args(argv)
    corpus = reviews()
    print(format_table(run_baselines(corpus, args.only), corpus))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
