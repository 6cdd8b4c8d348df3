"""Chapter 07 extra tests of shift_right, LabelSmoothingLoss, noam_schedule and greedy_decode, beyond
tests/specs/ch07.py.

The spec's cases are tests/test_public.py (`-k ch07`); these add what a case cannot say: the loss against
PyTorch's own F.cross_entropy (which smooths over the columns it is given: with the pad column left out
and its logit made very negative, the two agree), a loss that does not change when padding is added, the
schedule against the provided harness's warmup_inverse_sqrt times its peak, greedy decoding checked
against the model's own teacher-forced predictions, and the pieces together: a tiny Transformer trained
through the provided harness learns to reverse sequences. Like the public cases they run against `--impl`
(reference by default, `--impl learner` for your course_lib).
"""
from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from course_lib.provided.chapters import load_spec
from course_lib.provided.training import TrainConfig, train, warmup_inverse_sqrt

PAD, BOS, EOS = 0, 1, 2


# ---------------------------------------------------------------- shift_right
def test_shift_right_by_hand(impl) -> None:
    tgt = torch.tensor([[5, 6, 2, 0], [7, 8, 9, 2], [2, 0, 0, 0]])        # EOS 2, pad 0
    want = torch.tensor([[1, 5, 6, 0], [1, 7, 8, 9], [1, 0, 0, 0]])       # BOS 1, then tgt[:, :-1], padded
    got = impl.seq2seq.shift_right(tgt, 1, 0)
    real = tgt != 0      # where the label is padding no loss reads the input: any id there is right
    assert got.dtype == torch.int64 and got.shape == want.shape and torch.equal(got[real], want[real]), got


def test_shift_right_does_not_change_its_input(impl) -> None:
    tgt = torch.tensor([[5, 6, 2, 0]])
    before = tgt.clone()
    impl.seq2seq.shift_right(tgt, 1, 0)
    assert torch.equal(tgt, before), "shift_right changed its argument in place"


# ---------------------------------------------------------------- the loss
def _batch(vocab: int = 9, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(3, 5, vocab, generator=g)                    # (batch, seq, vocab)
    target = torch.randint(1, vocab, (3, 5), generator=g)                 # (batch, seq) never pad
    target[1, 3:] = PAD
    target[2, 1:] = PAD
    return logits, target


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_equals_torch_cross_entropy_over_the_real_columns(impl, smoothing: float) -> None:
    """PyTorch spreads eps / K over the K columns it is given; ours over the V - 1 non-pad columns. With the
    pad column dropped (K = V - 1) and its logit at -1e4 in ours (so that softmax gives it nothing), they agree."""
    logits, target = _batch()
    logits[..., PAD] = -1e4
    ours = impl.seq2seq.LabelSmoothingLoss(9, PAD, smoothing)(logits, target)
    real = target != PAD                                                  # (batch, seq)
    theirs = F.cross_entropy(logits[real][:, 1:], target[real] - 1, label_smoothing=smoothing)  # pad is column 0
    torch.testing.assert_close(ours, theirs)


def test_target_distribution_sums_to_one_and_spares_the_pad_column(impl) -> None:
    _, target = _batch()
    q = impl.seq2seq.LabelSmoothingLoss(9, PAD, 0.1).target_distribution(target)  # (batch, seq, vocab)
    real = target != PAD
    torch.testing.assert_close(q.sum(-1), real.float())                  # 1 per real label, 0 per pad
    assert (q[..., PAD] == 0).all(), "the pad column must get no mass"
    torch.testing.assert_close(q[real].gather(-1, target[real][:, None]).squeeze(-1),
                               torch.full((int(real.sum()),), 0.9 + 0.1 / 8))


def test_loss_does_not_change_when_padding_is_added(impl) -> None:
    logits, target = _batch()
    loss = impl.seq2seq.LabelSmoothingLoss(9, PAD, 0.1)
    longer_logits = torch.cat([logits, torch.randn(3, 4, 9)], dim=1)      # (batch, seq + 4, vocab)
    longer_target = torch.cat([target, torch.full((3, 4), PAD)], dim=1)   # 4 more padded labels
    torch.testing.assert_close(loss(longer_logits, longer_target), loss(logits, target))


def test_all_padding_gives_zero_loss_and_zero_gradient(impl) -> None:
    logits = torch.randn(2, 4, 7, requires_grad=True)
    value = impl.seq2seq.LabelSmoothingLoss(7, PAD, 0.1)(logits, torch.zeros(2, 4, dtype=torch.long))
    value.backward()
    assert torch.isfinite(value) and float(value.detach()) == 0.0
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_smoothing_lowers_the_confidence_that_the_loss_prefers(impl) -> None:
    """For one label the smoothed loss is smallest when p(label) = 1 - eps + eps / (V - 1), not at 1."""
    loss = impl.seq2seq.LabelSmoothingLoss(5, PAD, 0.2)
    target = torch.tensor([[3]])

    def at(confidence: float) -> float:
        p = torch.full((5,), (1 - confidence) / 3)
        p[PAD], p[3] = 1e-9, confidence
        return float(loss(p.log()[None, None], target))

    best = 1 - 0.2 + 0.2 / 4
    assert at(best) < at(0.99) and at(best) < at(0.6)


# ---------------------------------------------------------------- the schedule
def test_noam_is_the_harness_warmup_inverse_sqrt_times_its_peak(impl) -> None:
    shape = warmup_inverse_sqrt(400)                                      # the provided harness's shape, 1 at the peak
    for step in (0, 1, 50, 398, 399, 400, 1000, 20000):
        want = (64 * 400) ** -0.5 * shape(step)
        assert impl.seq2seq.noam_schedule(step, 64, 400) == pytest.approx(want, rel=1e-9), step


def test_the_harness_case_gives_the_rates_a_real_lambdalr_sets(impl) -> None:
    """The spec's "harness" probe computes LambdaLR's rates without building an optimizer (fast); here the
    real LambdaLR, step by step, must set exactly those rates."""
    spec = load_spec("07")
    inputs = spec.schedule_inputs(3, d_model=16, warmup=3, steps=(0, 12))
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: impl.seq2seq.noam_schedule(k, 16, 3))
    real = []
    for _ in range(13):
        real.append(optimizer.param_groups[0]["lr"])                      # the rate of this update
        optimizer.step()
        scheduler.step()
    assert torch.equal(spec.harness_schedule(impl, inputs)["lr"], torch.tensor(real, dtype=torch.float64))


def test_noam_peaks_at_the_end_of_warmup(impl) -> None:
    rates = [impl.seq2seq.noam_schedule(s, 512, 4000) for s in range(0, 12000, 7)]
    peak = max(range(len(rates)), key=rates.__getitem__) * 7
    assert abs(peak - 3999) <= 7 and rates[0] > 0
    assert max(rates) == pytest.approx((512 * 4000) ** -0.5, rel=1e-3)


# ---------------------------------------------------------------- greedy decoding
def _transformer(impl, vocab: int = 11, seed: int = 0):
    torch.manual_seed(seed)
    config = impl.transformer.TransformerConfig(vocab, vocab, d_model=16, num_heads=4, d_ff=32, num_layers=2,
                                                dropout=0.1, pad_id=PAD)
    return impl.transformer.Transformer(config).eval()


def test_greedy_tokens_are_the_models_own_teacher_forced_argmax(impl) -> None:
    """Feeding the greedy output back with teacher forcing, each position's argmax is the token chosen there."""
    model = _transformer(impl)
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 4, 3, 0, 0]])                # (batch, src_seq), padded
    out = impl.seq2seq.greedy_decode(model, src, 8, BOS, EOS, PAD)       # (batch, steps)
    assert out.dtype == torch.int64 and out.shape[0] == 2 and 1 <= out.shape[1] <= 8
    decoder_input = torch.cat([torch.full((2, 1), BOS), out[:, :-1]], dim=1)
    with torch.no_grad():
        again = model(src, decoder_input).argmax(-1)                     # (batch, steps)
    for b in range(2):
        ends = (out[b] == EOS).nonzero()
        n = int(ends[0]) + 1 if len(ends) else out.shape[1]
        assert torch.equal(again[b, :n], out[b, :n]), b
        assert (out[b, n:] == PAD).all(), "after EOS a sequence holds padding only"


def test_greedy_decoding_stops_where_the_successor_model_says(impl) -> None:
    spec = load_spec("07")
    inputs = spec.successor_inputs(5, batch=3, lengths=(2, 5, 3), max_len=20)
    model = spec.SuccessorModel(inputs["src"].size(1)).eval()
    out = impl.seq2seq.greedy_decode(model, inputs["src"], 20, BOS, EOS, PAD)
    assert out.shape == (3, 5), "the longest sequence has 5 tokens (its EOS included): stop there"
    assert [int((row == EOS).nonzero()[0]) for row in out] == [1, 4, 2]


# ---------------------------------------------------------------- the pieces together
@pytest.mark.training  # trains to a bar
def test_a_tiny_transformer_learns_to_reverse_through_the_harness(impl, tmp_path) -> None:
    """Teacher forcing + label smoothing + the Noam schedule, through the provided harness, learn to reverse
    sequences of 4 tokens in 300 steps (about 10 s on one core); greedy decoding then gets most right."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                                              # faster than 2 on a shared CPU
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, 10, (4096, 4), generator=g)                   # (n, 4) tokens 3 .. 9
    tgt = torch.cat([src.flip(1), torch.full((4096, 1), EOS)], dim=1)    # (n, 5) reversed, then EOS
    config = impl.transformer.TransformerConfig(10, 10, d_model=32, num_heads=4, d_ff=64, num_layers=1,
                                                dropout=0.0, pad_id=PAD, max_len=16)
    torch.manual_seed(0)
    model = impl.transformer.Transformer(config)
    criterion = impl.seq2seq.LabelSmoothingLoss(10, PAD, 0.1)

    def batches(epoch, ctx):
        order = torch.randperm(3840, generator=torch.Generator().manual_seed(epoch))
        return ((src[order[i:i + 64]], tgt[order[i:i + 64]]) for i in range(0, 3840, 64))

    def loss_fn(net, batch):
        s, t = batch
        return criterion(net(s, impl.seq2seq.shift_right(t, BOS, PAD)), t), len(s)

    result = train(model, loss_fn, batches, TrainConfig(steps=300, lr=1.0, betas=(0.9, 0.98), progress=False,
                                                        weight_decay=0.0),
                   schedule=functools.partial(impl.seq2seq.noam_schedule, d_model=32, warmup=100), device="cpu")
    torch.set_num_threads(threads)
    out = impl.seq2seq.greedy_decode(result.model.eval(), src[3840:], 6, BOS, EOS, PAD)
    assert out.shape == tgt[3840:].shape
    exact = (out == tgt[3840:]).all(1).float().mean()
    assert exact > 0.9, f"only {exact:.0%} of held-out sequences reversed exactly"
