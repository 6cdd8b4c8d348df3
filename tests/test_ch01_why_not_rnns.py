"""Chapter 01 extra tests of the RNN and gradient_norms, beyond the cases of tests/specs/ch01.py.

The spec's cases are tests/test_public.py (`-k ch01`); these add what a case cannot say: agreement with
PyTorch's own torch.nn.RNN (batch_first, tanh) holding the same weights, both ways, and with
torch.nn.RNNCell for one step; gradient norms equal to the Frobenius norms of the Jacobians that
torch.autograd.functional.jacobian computes, and to the closed form of a linear recurrence; the
caller's x left alone. Like the public cases they run against `--impl` (reference by default,
`--impl learner` for your course_lib).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from course_lib.provided import chapters

NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")  # torch.nn.RNN adds "_l0" (layer 0)
SIZES = [(3, 5), (6, 2), (4, 4)]                           # (input_size, hidden_size); the last one square


def _copy(source: nn.Module, target: nn.Module, source_suffix: str, target_suffix: str) -> None:
    with torch.no_grad():
        for name in NAMES:
            getattr(target, name + target_suffix).copy_(getattr(source, name + source_suffix))


@pytest.mark.parametrize("input_size,hidden_size", SIZES, ids=lambda v: str(v))
@pytest.mark.parametrize("with_h0", [False, True], ids=["h0-None", "h0-given"])
@pytest.mark.parametrize("direction", ["torch-to-ours", "ours-to-torch"])
def test_agrees_with_torch_rnn(impl, input_size: int, hidden_size: int, with_h0: bool, direction: str) -> None:
    torch.manual_seed(11)
    ours = impl.rnn.RNN(input_size, hidden_size)
    theirs = nn.RNN(input_size, hidden_size, nonlinearity="tanh", batch_first=True)
    if direction == "torch-to-ours":
        _copy(theirs, ours, "_l0", "")
    else:
        _copy(ours, theirs, "", "_l0")
    x = torch.randn(3, 7, input_size)                                  # (batch, seq, input_size)
    h0 = torch.randn(3, hidden_size) if with_h0 else None              # (batch, hidden_size)
    outputs, h_last = ours(x, h0) if with_h0 else ours(x)
    # torch.nn.RNN takes and returns states with a leading layers axis: (num_layers, batch, hidden_size)
    expected, last = theirs(x, h0[None]) if with_h0 else theirs(x)
    torch.testing.assert_close(outputs, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(h_last, last[0], rtol=1e-5, atol=1e-6)


def test_parameters_have_torch_rnn_shapes(impl) -> None:
    ours, theirs = impl.rnn.RNN(3, 5), nn.RNN(3, 5)
    for name in NAMES:
        assert getattr(ours, name).shape == getattr(theirs, name + "_l0").shape, name
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


def test_rnn_step_agrees_with_torch_rnn_cell(impl) -> None:
    torch.manual_seed(5)
    cell = nn.RNNCell(3, 5, nonlinearity="tanh")
    x_t, h_prev = torch.randn(4, 3), torch.randn(4, 5)
    h_t = impl.rnn.rnn_step(x_t, h_prev, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
    torch.testing.assert_close(h_t, cell(x_t, h_prev), rtol=1e-5, atol=1e-6)


def _jacobian_norms(rnn: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """‖∂h_T/∂x_t‖_F from the full Jacobian, (batch, hidden, batch, seq, input): its blocks b = b'."""
    jac = torch.autograd.functional.jacobian(lambda inputs: rnn(inputs)[1], x)
    return torch.stack([jac[b, :, b].pow(2).sum(dim=(0, 2)).sqrt() for b in range(x.shape[0])])  # (batch, seq)


@pytest.mark.parametrize("input_size,hidden_size", SIZES, ids=lambda v: str(v))
def test_gradient_norms_agree_with_autograd_jacobian(impl, input_size: int, hidden_size: int) -> None:
    torch.manual_seed(2)
    rnn = impl.rnn.RNN(input_size, hidden_size)
    x = torch.randn(2, 9, input_size)
    norms = impl.rnn.gradient_norms(rnn, x)
    assert norms.shape == (2, 9)
    torch.testing.assert_close(norms, _jacobian_norms(rnn, x), rtol=1e-5, atol=1e-8)


def test_gradient_norms_of_a_linear_recurrence_follow_by_hand(impl) -> None:
    """h_t = decay·h_{t-1} + x_t Mᵀ: ∂h_T/∂x_t = decay^(T-t) M, whatever x (see the spec's linear_norms)."""
    spec = chapters.load_spec("01")
    inputs = spec.linear(31, batch=2, seq=10, decay=0.5)
    norms = impl.rnn.gradient_norms(spec.Linear(inputs["mix"], inputs["decay"]), inputs["x"])
    expected = spec.linear_norms(inputs)
    assert torch.allclose(expected[:, :-1] / expected[:, 1:], torch.tensor(0.5))  # the formula itself
    torch.testing.assert_close(norms, expected, rtol=1e-5, atol=1e-9)


def test_gradient_norms_leave_x_alone(impl) -> None:
    torch.manual_seed(4)
    rnn = impl.rnn.RNN(3, 4)
    x = torch.randn(2, 5, 3, requires_grad=True)
    before = x.detach().clone()
    norms = impl.rnn.gradient_norms(rnn, x)
    assert x.grad is None, "gradient_norms must not write into the caller's x.grad"
    assert torch.equal(x.detach(), before)
    assert not norms.requires_grad, "the norms are measurements: return them without grad"


def test_gradient_norms_under_no_grad(impl) -> None:
    """A plot cell may run under torch.no_grad(); the measurement still needs autograd."""
    torch.manual_seed(6)
    rnn = impl.rnn.RNN(2, 3)
    x = torch.randn(1, 4, 2)
    with torch.no_grad():
        norms = impl.rnn.gradient_norms(rnn, x)
    torch.testing.assert_close(norms, impl.rnn.gradient_norms(rnn, x))
