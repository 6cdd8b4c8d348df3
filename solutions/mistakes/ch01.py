"""Known-wrong variants of chapter 01, keyed like MISTAKES in tests/specs/ch01.py.

Each is the reference with one mistake planted: a step function and an RNN whose forward loops over
it (or forgets to carry the state), or a gradient_norms that differentiates the wrong tensor.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
from torch import Tensor, nn

from course_ref import rnn as ref


def step_no_tanh(x_t: Tensor, h_prev: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias_ih: Tensor,
                 bias_hh: Tensor) -> Tensor:
    return x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + bias_hh


def step_with(activation: Callable[[Tensor], Tensor]) -> Callable:
    def rnn_step(x_t: Tensor, h_prev: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias_ih: Tensor,
                 bias_hh: Tensor) -> Tensor:
        return activation(x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + bias_hh)
    return rnn_step


def step_untransposed(x_t: Tensor, h_prev: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias_ih: Tensor,
                      bias_hh: Tensor) -> Tensor:
    return torch.tanh(x_t @ weight_ih + bias_ih + h_prev @ weight_hh + bias_hh)


def step_bias_twice(x_t: Tensor, h_prev: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias_ih: Tensor,
                    bias_hh: Tensor) -> Tensor:
    return torch.tanh(x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + bias_hh + bias_ih + bias_hh)


def module(step: Callable = ref.rnn_step, carry: bool = True) -> type:
    """An RNN class looping over ``step``; without ``carry`` every step starts from h0."""
    class Wrong(ref.RNN):
        def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
            start = x.new_zeros(x.shape[0], self.hidden_size) if h0 is None else h0
            h, states = start, []
            for t in range(x.shape[1]):
                h = step(x[:, t], h if carry else start, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
                states.append(h)
            return torch.stack(states, dim=1), h
    return Wrong


def _leaf(x: Tensor) -> Tensor:
    return x.detach().requires_grad_(True)


@torch.enable_grad()
def norms_step_jacobian(rnn: nn.Module, x: Tensor) -> Tensor:
    """‖∂h_t/∂x_t‖_F: each input against the state of its own step."""
    x = _leaf(x)
    outputs, _ = rnn(x)
    squares = torch.zeros(x.shape[:2], dtype=x.dtype)
    for t in range(x.shape[1]):
        for j in range(outputs.shape[-1]):
            (g,) = torch.autograd.grad(outputs[:, t, j].sum(), x, retain_graph=True)
            squares[:, t] += g[:, t].pow(2).sum(dim=-1)
    return squares.sqrt()


def norms_of_sum(last_only: bool) -> Callable[[nn.Module, Tensor], Tensor]:
    """‖∂(sum of h_last)/∂x_t‖, or with ``last_only`` False ‖∂(sum of all outputs)/∂x_t‖."""
    @torch.enable_grad()
    def norms(rnn: nn.Module, x: Tensor) -> Tensor:
        x = _leaf(x)
        outputs, h_last = rnn(x)
        (g,) = torch.autograd.grad((h_last if last_only else outputs).sum(), x)
        return g.norm(dim=-1)
    return norms


_rnn, _step, _norms = "rnn.RNN", "rnn.rnn_step", "rnn.gradient_norms"
def norms_on(own_leaf: bool, enable_grad: bool) -> Callable[[nn.Module, Tensor], Tensor]:
    """The reference's gradient_norms without ``torch.enable_grad()``, or on the caller's x itself."""
    def norms(rnn: nn.Module, x: Tensor) -> Tensor:
        x = _leaf(x) if own_leaf else x.requires_grad_(True)
        with torch.enable_grad() if enable_grad else contextlib.nullcontext():
            _, h_last = rnn(x)
            squares = torch.zeros(x.shape[:2], dtype=x.dtype)
            for j in range(h_last.shape[-1]):
                (row,) = torch.autograd.grad(h_last[:, j].sum(), x, retain_graph=True)
                squares += row.pow(2).sum(dim=-1)
        return squares.sqrt()
    return norms


_relu, _sigmoid = step_with(torch.relu), step_with(torch.sigmoid)
VARIANTS: dict[str, dict[str, Callable]] = {
    "state_not_carried": {_rnn: module(carry=False)},
    "no_tanh": {_step: step_no_tanh, _rnn: module(step_no_tanh)},
    "transposed_weights": {_step: step_untransposed, _rnn: module(step_untransposed)},
    "bias_twice": {_step: step_bias_twice, _rnn: module(step_bias_twice)},
    "step_jacobian": {_norms: norms_step_jacobian},
    "outputs_sum": {_norms: norms_of_sum(last_only=False)},
    "last_state_sum": {_norms: norms_of_sum(last_only=True)},
    "relu_for_tanh": {_step: _relu, _rnn: module(_relu)},
    "sigmoid_for_tanh": {_step: _sigmoid, _rnn: module(_sigmoid)},
    "norms_without_enable_grad": {_norms: norms_on(own_leaf=True, enable_grad=False)},
    "norms_change_x": {_norms: norms_on(own_leaf=False, enable_grad=True)},
}
