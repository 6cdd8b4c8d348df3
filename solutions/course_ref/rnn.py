"""Chapter 01 — Why not RNNs: a vanilla (Elman) recurrent network, and how far its gradients reach.

    h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh)        (torch.nn.RNN with nonlinearity="tanh")

An RNN reads a sequence one position at a time: step t needs the state h_{t-1} of step t-1, so n
positions take n steps that cannot run side by side, and the input x_t reaches the last state h_T only
through the T - t steps after it. `gradient_norms` measures how much of x_t is left in h_T.

Shapes are batch-first, like torch.nn.RNN(batch_first=True): x is (batch, seq, input_size).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def rnn_step(x_t: Tensor, h_prev: Tensor, weight_ih: Tensor, weight_hh: Tensor,
             bias_ih: Tensor, bias_hh: Tensor) -> Tensor:
    """One step of the RNN: the new state from the current input and the previous state.

    Args:
        x_t: (batch, input_size), the inputs at one position.
        h_prev: (batch, hidden_size), the state after the previous position.
        weight_ih: (hidden_size, input_size); weight_hh: (hidden_size, hidden_size).
        bias_ih, bias_hh: (hidden_size,) each.

    Returns:
        h_t: (batch, hidden_size) = tanh(x_t W_ihᵀ + b_ih + h_prev W_hhᵀ + b_hh), in the inputs' dtype.
        The weights are stored (out, in) like nn.Linear's, hence the transposes.

    Example: with zero weights and biases the state is tanh(0) = 0 whatever the input:
    >>> import torch
    >>> z = torch.zeros
    >>> rnn_step(torch.ones(1, 3), z(1, 2), z(2, 3), z(2, 2), z(2), z(2))
    tensor([[0., 0.]])
    """
    ### BEGIN SOLUTION
    from_input = x_t @ weight_ih.T + bias_ih  # (batch, hidden_size)
    from_state = h_prev @ weight_hh.T + bias_hh  # (batch, hidden_size)
    return torch.tanh(from_input + from_state)  # (batch, hidden_size)
    ### END SOLUTION


class RNN(nn.Module):
    """A one-layer tanh RNN that loops over the positions, calling ``rnn_step`` once per position.

    Args:
        input_size: width of each input vector x_t.
        hidden_size: width of the state h_t.

    Parameters (names and shapes are part of the contract; torch.nn.RNN calls them ``weight_ih_l0`` ...):
        ``weight_ih`` (hidden_size, input_size), ``weight_hh`` (hidden_size, hidden_size),
        ``bias_ih`` (hidden_size,), ``bias_hh`` (hidden_size,); all drawn from U(-1/√hidden, 1/√hidden)
        as torch.nn.RNN draws them.

    forward(x, h0=None):
        x: (batch, seq, input_size), batch first.
        h0: the initial state (batch, hidden_size); None means zeros.
        Returns (outputs, h_last): outputs (batch, seq, hidden_size) holds h_1 ... h_T, the state after
        every position; h_last (batch, hidden_size) is h_T, equal to outputs[:, -1].

    Example:
    >>> import torch
    >>> rnn = RNN(input_size=3, hidden_size=5)
    >>> outputs, h_last = rnn(torch.randn(2, 7, 3))
    >>> outputs.shape, h_last.shape
    (torch.Size([2, 7, 5]), torch.Size([2, 5]))
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(hidden_size))
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        ### BEGIN SOLUTION
        batch, seq, _ = x.shape
        h = x.new_zeros(batch, self.hidden_size) if h0 is None else h0  # (batch, hidden_size)
        states = []
        for t in range(seq):  # one step per position, each waiting for the one before
            h = rnn_step(x[:, t], h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)  # (batch, hidden)
            states.append(h)
        return torch.stack(states, dim=1), h  # (batch, seq, hidden_size), (batch, hidden_size)
        ### END SOLUTION


def gradient_norms(rnn: nn.Module, x: Tensor) -> Tensor:
    """How strongly the last state h_T depends on each input x_t: ‖∂h_T/∂x_t‖_F for every t.

    For one sequence, ∂h_T/∂x_t is the Jacobian matrix (hidden_size, input_size) whose entry (j, i) is
    ∂h_T[j]/∂x_t[i]; its Frobenius norm is √(Σ_j Σ_i (∂h_T[j]/∂x_t[i])²). The sequences of a batch are
    independent, so each gets its own row of norms. h_T is the last state, the same for every t, and
    the Jacobian is the whole matrix, not the gradient of a sum of h_T.

    Args:
        rnn: any module whose ``forward(x)`` returns ``(outputs, h_last)`` with h_last (batch, hidden),
            such as ``RNN``; it is called once, with h0 None.
        x: (batch, seq, input_size), the inputs; not modified, and no gradient flows back to it.
            Works under torch.no_grad() too: the measurement turns autograd on for itself.

    Returns:
        (batch, seq) in x's dtype, without grad: entry [b, t] is ‖∂h_T/∂x_t‖_F for sequence b.
        Plot it against the distance T - t to see how fast the influence of an input fades.

    Computed with autograd: one backward pass per unit j of h_T gives row j of every Jacobian at
    once, (batch, seq, input_size); the squares are summed over j and over the inputs' features.

    Example (two sequences of ten positions: one norm per sequence and position):
    >>> import torch
    >>> norms = gradient_norms(RNN(3, 5), torch.randn(2, 10, 3))
    >>> norms.shape
    torch.Size([2, 10])
    """
    ### BEGIN SOLUTION
    x = x.detach().requires_grad_(True)  # a leaf of our own, so that nothing reaches the caller's x
    with torch.enable_grad():
        _, h_last = rnn(x)  # (batch, hidden)
        squares = torch.zeros(x.shape[:2], dtype=x.dtype, device=x.device)  # (batch, seq)
        for j in range(h_last.shape[-1]):
            (row,) = torch.autograd.grad(h_last[:, j].sum(), x, retain_graph=True)  # (batch, seq, input)
            squares += row.pow(2).sum(dim=-1)  # (batch, seq)
    return squares.sqrt()  # (batch, seq)
    ### END SOLUTION
