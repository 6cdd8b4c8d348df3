"""The book's beam search (book/_code/beam.py, chapter 07's section "Beyond the basics: beam search") on the
reference Transformer: a beam of one is greedy decoding, and a beam wide enough to keep every output finds
the best one an exhaustive search finds."""
from __future__ import annotations

import pytest
import torch

from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import load_file, load_impl

beam = load_file("course_book_beam", LAYOUT.root / "book" / "_code" / "beam.py")
beam_search, length_penalty = beam.beam_search, beam.length_penalty
PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(scope="module")
def impl():
    return load_impl("reference")


def _transformer(impl, vocab: int = 11, seed: int = 0):
    torch.manual_seed(seed)
    config = impl.transformer.TransformerConfig(vocab, vocab, d_model=16, num_heads=4, d_ff=32, num_layers=2,
                                                dropout=0.1, pad_id=PAD)
    return impl.transformer.Transformer(config).eval()


def _ends_early(impl, seed: int):
    """A random Transformer whose EOS is likely enough that sentences end at different steps."""
    model = _transformer(impl, vocab=7, seed=seed)
    with torch.no_grad():
        model.generator.bias[EOS] += 1.5
    return model


@pytest.mark.parametrize("seed", range(4))
def test_a_beam_of_one_is_greedy_decoding(impl, seed: int) -> None:
    model = _ends_early(impl, seed)
    src = torch.randint(3, 7, (6, 5), generator=torch.Generator().manual_seed(seed))
    src[1, 3:] = PAD
    greedy = impl.seq2seq.greedy_decode(model, src, 6, BOS, EOS, PAD)
    assert torch.equal(beam_search(model, src, 6, BOS, EOS, PAD, beam_size=1), greedy)


def _next_log_probs(model, src: torch.Tensor, prefix: tuple[int, ...]) -> torch.Tensor:
    """log p(next token | BOS + prefix, src), (V,), with the masks beam_search uses."""
    src_mask = (src != PAD)[None, None, None, :]                         # (1, 1, 1, src_seq)
    tgt = torch.tensor([[BOS, *prefix]])                                 # (1, n)
    n = tgt.size(1)
    tgt_mask = (tgt != PAD)[:, None, None, :] & torch.tril(torch.ones(n, n, dtype=torch.bool))
    with torch.no_grad():
        hidden = model.decode(tgt, model.encode(src[None], src_mask), src_mask, tgt_mask)
        return model.generator(hidden[0, -1]).float().log_softmax(-1)


def _best_by_exhaustive_search(model, src: torch.Tensor, max_len: int, alpha: float) -> tuple[int, ...]:
    """Score every output (ended by EOS, or max_len tokens long) one by one: the best by log p / lp."""
    vocab = model.generator.out_features
    scores: dict[tuple[int, ...], float] = {}
    frontier = {(): 0.0}
    for _ in range(max_len):
        grown = {}
        for prefix, logp in frontier.items():
            nxt = _next_log_probs(model, src, prefix)
            for t in range(vocab):
                grown[prefix + (t,)] = logp + float(nxt[t])
        frontier = {y: v for y, v in grown.items() if y[-1] != EOS}
        for y, v in grown.items():
            if y[-1] == EOS or len(y) == max_len:
                written = torch.tensor(float(sum(t != PAD for t in y)))
                scores[y] = v / float(length_penalty(written, alpha))
    return max(scores, key=scores.get)


def _peaked(impl, seed: int, eos_bias: float):
    """A random Transformer with sharper predictions, that never writes BOS or padding (as a trained one)."""
    model = _transformer(impl, vocab=7, seed=seed)
    with torch.no_grad():
        model.generator.weight.mul_(4)
        model.generator.bias[EOS] += eos_bias
        model.generator.bias[[PAD, BOS]] = -10.0
    return model


@pytest.mark.parametrize("alpha", [0.0, 0.6])
@pytest.mark.parametrize("seed, eos_bias", [(3, 0.0), (2, -1.0)])
def test_a_wide_beam_finds_the_best_output_of_an_exhaustive_search(impl, seed: int, eos_bias: float,
                                                                   alpha: float) -> None:
    """All outputs of at most 3 tokens of 7 scored one by one: a beam wide enough to keep them all (7^3)
    returns the best by log p / lp, for each sentence of the batch. For these models the best output is not
    always greedy's, has 1 to 3 tokens, and depends on alpha."""
    model, max_len = _peaked(impl, seed, eos_bias), 3
    src = torch.tensor([[3, 4, 5, 6], [6, 5, PAD, PAD], [4, 4, 3, PAD]])
    got = beam_search(model, src, max_len, BOS, EOS, PAD, beam_size=7 ** max_len, alpha=alpha)
    for b in range(len(src)):
        best = _best_by_exhaustive_search(model, src[b], max_len, alpha)
        row = got[b].tolist()
        assert tuple(row[:len(best)]) == best and all(t == PAD for t in row[len(best):]), (
            f"sentence {b}: beam search returned {row}, the best output is {list(best)}")


def test_the_exhaustive_search_above_is_not_greedy_decoding(impl) -> None:
    """What makes the test above able to fail: for these models greedy decoding misses the best output."""
    model = _peaked(impl, 3, 0.0)
    src = torch.tensor([[3, 4, 5, 6]])
    greedy = tuple(t for t in impl.seq2seq.greedy_decode(model, src, 3, BOS, EOS, PAD)[0].tolist() if t != PAD)
    assert greedy != _best_by_exhaustive_search(model, src[0], 3, 0.0)


def test_beam_search_refuses_a_beam_of_zero(impl) -> None:
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(_transformer(impl), torch.tensor([[3, 4]]), 4, BOS, EOS, PAD, beam_size=0)
