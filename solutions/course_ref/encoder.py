"""Chapter 05 — Encoder: layer normalisation, the feed-forward network, the encoder layer and its stack.

    Post-LN (the paper, section 3.1):   x = LayerNorm(x + Sublayer(x))
    Pre-LN  (norm_first=True):          x = x + Sublayer(LayerNorm(x)), and one LayerNorm after the stack

Each encoder layer has two sublayers: self-attention (your chapter 03 MultiHeadAttention) and a
position-wise feed-forward network, each wrapped in a residual connection, dropout and a layer norm.

Mask convention (the whole course): a boolean tensor, True = may attend, broadcastable to
(batch, heads, seq_q, seq_k); the encoder takes a padding mask (batch, 1, 1, seq).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .multihead import MultiHeadAttention


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis, with a learned gain and shift; equal to torch.nn.LayerNorm.

        y = (x - mean) / sqrt(var + eps) * weight + bias

    mean and var are taken over the last axis (the d_model features of one position); var is the
    *biased* variance (divide by d_model, not d_model - 1).

    Args:
        d_model: size of the last axis.
        eps: added to the variance inside the square root.

    Members: ``weight`` (d_model,), initialised to ones; ``bias`` (d_model,), initialised to zeros;
    both ``nn.Parameter``.

    forward(x): x (..., d_model), any float dtype -> (..., d_model), same dtype.

    Example:
    >>> import torch
    >>> LayerNorm(4)(torch.tensor([[1., 2., 3., 4.]]))
    tensor([[-1.3416, -0.4472,  0.4472,  1.3416]], grad_fn=<AddBackward0>)
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        ### BEGIN SOLUTION
        self.weight = nn.Parameter(torch.ones(d_model))  # (d_model,)
        self.bias = nn.Parameter(torch.zeros(d_model))  # (d_model,)
        ### END SOLUTION

    def forward(self, x: Tensor) -> Tensor:
        ### BEGIN SOLUTION
        # Sums divided by d_model rather than .mean(), and one centring, times 1/sqrt: the same formula
        # with fewer passes over (..., d_model) in the backward pass (a mean's gradient is a full-size division).
        d_model = x.size(-1)
        centred = x - x.sum(dim=-1, keepdim=True) / d_model  # (..., d_model): x - mean
        var = (centred * centred).sum(dim=-1, keepdim=True) / d_model  # (..., 1) biased: divide by d_model
        x_hat = centred * torch.rsqrt(var + self.eps)  # (..., d_model)
        return x_hat * self.weight + self.bias  # (..., d_model)
        ### END SOLUTION


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same two layers applied at every position.

    Args:
        d_model: width of the input and the output.
        d_ff: width of the hidden layer (2048 for d_model 512 in the paper).
        dropout: probability of dropping a hidden unit (after the ReLU) in training mode.

    Members: ``linear1`` = nn.Linear(d_model, d_ff), ``linear2`` = nn.Linear(d_ff, d_model), ``dropout``.

    forward(x): x (batch, seq, d_model) (any leading axes) -> (batch, seq, d_model).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        ### BEGIN SOLUTION
        hidden = torch.relu(self.linear1(x))  # (batch, seq, d_ff)
        return self.linear2(self.dropout(hidden))  # (batch, seq, d_model)
        ### END SOLUTION


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention, then the feed-forward network, each with residual and norm.

    Post-LN (norm_first=False, the paper):          Pre-LN (norm_first=True):
        x = norm1(x + drop(self_attn(x, x, x)))         x = x + drop(self_attn(h, h, h)),  h = norm1(x)
        x = norm2(x + drop(ffn(x)))                     x = x + drop(ffn(norm2(x)))

    Args:
        d_model, num_heads: as for MultiHeadAttention (d_model divisible by num_heads).
        d_ff: hidden width of the feed-forward network.
        dropout: on each sublayer's output, inside the FFN and on the attention weights (training only).
        norm_first: False for Post-LN (the paper's layer), True for Pre-LN.

    Members: ``self_attn`` (MultiHeadAttention), ``ffn`` (PositionwiseFeedForward), ``norm1``, ``norm2``
    (LayerNorm), ``dropout`` (nn.Dropout), ``norm_first``.

    forward(x, mask=None):
        x: (batch, seq, d_model).
        mask: optional bool, True = may attend: a padding mask (batch, 1, 1, seq), or anything
            broadcastable to (batch, heads, seq, seq). It goes to the self-attention unchanged.
        Returns (batch, seq, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        ### BEGIN SOLUTION
        if self.norm_first:
            h = self.norm1(x)  # (batch, seq, d_model)
            x = x + self.dropout(self.self_attn(h, h, h, mask=mask))  # (batch, seq, d_model)
            return x + self.dropout(self.ffn(self.norm2(x)))  # (batch, seq, d_model)
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask=mask)))  # (batch, seq, d_model)
        return self.norm2(x + self.dropout(self.ffn(x)))  # (batch, seq, d_model)
        ### END SOLUTION


class Encoder(nn.Module):
    """A stack of ``num_layers`` encoder layers; with Pre-LN, one more LayerNorm at the end.

    Args: ``num_layers`` and those of EncoderLayer, which every layer gets.

    Members: ``layers`` (nn.ModuleList of EncoderLayer); ``norm``: a LayerNorm(d_model) for Pre-LN
    (norm_first=True), whose residual stream is never normalised otherwise, and **None** for Post-LN,
    whose last layer already ends with a norm (the paper's encoder).

    forward(x, mask=None):
        x: (batch, seq, d_model), the embedded and position-encoded tokens.
        mask: optional bool padding mask (batch, 1, 1, seq), True = a real token (may be attended to).
        Returns (batch, seq, d_model); positions that are padding get values too (ignore them).

    Example:
    >>> import torch
    >>> enc = Encoder(num_layers=2, d_model=16, num_heads=4, d_ff=32).eval()
    >>> keep = torch.tensor([[True, True, True, False]])           # one sequence of 3 tokens + 1 pad
    >>> enc(torch.randn(1, 4, 16), mask=keep[:, None, None, :]).shape
    torch.Size([1, 4, 16])
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        ### BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x, mask=mask)  # (batch, seq, d_model)
        return x if self.norm is None else self.norm(x)  # (batch, seq, d_model)
        ### END SOLUTION
