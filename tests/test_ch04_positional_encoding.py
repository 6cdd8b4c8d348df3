"""Chapter 04 extra tests of the positional encoding, beyond the cases of tests/specs/ch04.py.

The spec's cases are tests/test_public.py (`-k ch04`); these add what a case cannot say: table values
derived by hand, the relative-position property of the table, an odd d_model, the buffer moving with
.to() and surviving a state_dict round trip, the error past max_len, dropout only in training and the
√d_model scale. Like the public cases they run against `--impl` (reference by default, `--impl learner`
for your course_lib).
"""
from __future__ import annotations

import math

import pytest
import torch


def test_table_values_by_hand(impl) -> None:
    """PE(0) = [sin 0, cos 0, …] = [0, 1, 0, 1, …]; column 0 has frequency 1, column 2 frequency 10000^(-2/d)."""
    pe = impl.positional.sinusoidal_table(6, 8)
    assert pe.shape == (6, 8) and pe.dtype == torch.float32
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0] * 4))
    assert pe[1, 0].item() == pytest.approx(math.sin(1.0), abs=1e-6)        # sin(1 / 10000^0)
    assert pe[1, 1].item() == pytest.approx(math.cos(1.0), abs=1e-6)
    assert pe[5, 2].item() == pytest.approx(math.sin(5 / 10000 ** (2 / 8)), abs=1e-6)  # 2i = 2
    assert pe[5, 7].item() == pytest.approx(math.cos(5 / 10000 ** (6 / 8)), abs=1e-6)  # 2i = 6, the cos column


def test_shift_by_k_is_one_rotation_for_every_position(impl) -> None:
    """PE(pos + k) = M_k PE(pos) with M_k built from k alone: a 2x2 rotation per frequency (sin/cos addition)."""
    d_model, n = 16, 60
    pe = impl.positional.sinusoidal_table(n, d_model).double()
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    for k in (1, 7, 25):
        c, s = torch.cos(k * omega), torch.sin(k * omega)
        # sin(a + kω) = sin a cos kω + cos a sin kω;  cos(a + kω) = cos a cos kω - sin a sin kω
        m_k = torch.block_diag(*[torch.tensor([[ci, si], [-si, ci]]) for ci, si in zip(c, s)])  # (d_model, d_model)
        torch.testing.assert_close(pe[:-k] @ m_k.T, pe[k:], rtol=0, atol=1e-5)  # rows: PE(pos + k) = M_k PE(pos)


def test_odd_d_model_is_refused(impl) -> None:
    with pytest.raises(ValueError, match="even"):
        impl.positional.sinusoidal_table(10, 7)


def test_pe_is_a_buffer_that_moves_and_is_saved(impl) -> None:
    """A persistent buffer or not (persistent=False): what its own state_dict saves, a fresh module loads."""
    module = impl.positional.PositionalEncoding(8, max_len=20)
    assert "pe" in dict(module.named_buffers()) and "pe" not in dict(module.named_parameters())
    assert tuple(module.pe.shape) == (1, 20, 8) and not module.pe.requires_grad
    assert sum(p.numel() for p in module.parameters()) == 0, "the encoding has nothing to train"
    torch.testing.assert_close(module.pe[0], impl.positional.sinusoidal_table(20, 8))
    state = module.state_dict()
    fresh = impl.positional.PositionalEncoding(8, max_len=20)
    fresh.load_state_dict(state)
    torch.testing.assert_close(fresh.pe, module.pe)
    assert module.to(torch.float64).pe.dtype == torch.float64
    assert module.to("meta").pe.device.type == "meta"     # a device move, without a GPU


def test_any_length_up_to_max_len_and_a_clear_error_past_it(impl) -> None:
    module = impl.positional.PositionalEncoding(4, max_len=10).eval()
    for seq in (1, 5, 10):
        x = torch.zeros(2, seq, 4)
        torch.testing.assert_close(module(x), impl.positional.sinusoidal_table(seq, 4).expand(2, -1, -1))
    with pytest.raises(ValueError) as error:
        module(torch.zeros(1, 13, 4))
    assert "13" in str(error.value) and "10" in str(error.value) and "max_len" in str(error.value)


def test_dropout_only_in_training(impl) -> None:
    torch.manual_seed(0)
    module = impl.positional.PositionalEncoding(16, dropout=0.5, max_len=32)
    x = torch.randn(3, 9, 16)
    clean = x + impl.positional.sinusoidal_table(9, 16)
    module.eval()
    torch.testing.assert_close(module(x), clean)
    assert torch.equal(module(x), module(x)), "in evaluation mode the output must not be random"
    module.train()
    noisy = module(x)
    dropped = noisy == 0
    assert 0.3 < dropped.float().mean().item() < 0.7, "with p = 0.5 about half the elements should be zeroed"
    torch.testing.assert_close(noisy[~dropped], clean[~dropped] / 0.5)


def test_token_embedding_scale(impl) -> None:
    torch.manual_seed(1)
    emb = impl.positional.TokenEmbedding(vocab_size=12, d_model=25)
    assert isinstance(emb.embedding, torch.nn.Embedding) and tuple(emb.embedding.weight.shape) == (12, 25)
    tokens = torch.tensor([[0, 3, 3, 11], [5, 1, 0, 2]])                       # (batch, seq)
    out = emb(tokens)
    assert out.shape == (2, 4, 25)
    torch.testing.assert_close(out, emb.embedding.weight[tokens] * 5.0)       # √25 = 5
