"""Chapter 03 — Multi-head attention: several attentions side by side, each on its own slice of d_model.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,   head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)
                                                           ("Attention Is All You Need", section 3.2.2)

The h projections of width d_k = d_model / h are computed at once by one d_model x d_model linear layer
each for Q, K and V; `split_heads` then views the result as h heads, `merge_heads` glues them back.

Mask convention (the whole course): a boolean tensor, True = may attend, broadcastable to
(batch, heads, seq_q, seq_k): a padding mask (batch, 1, 1, seq_k) is shared by every head.
"""
from __future__ import annotations

from torch import Tensor, nn

from .attention import scaled_dot_product_attention


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Cut the last axis into ``num_heads`` heads and move the heads before the positions.

    Args:
        x: (batch, seq, d_model), d_model divisible by num_heads.
        num_heads: the number of heads h.

    Returns:
        (batch, heads, seq, d_k) with d_k = d_model // num_heads: head i holds the features
        i*d_k ... (i+1)*d_k - 1 of every position.

    Example:
    >>> import torch
    >>> split_heads(torch.arange(8.).view(1, 2, 4), 2)[0, 1]   # head 1: features 2, 3 of both positions
    tensor([[2., 3.],
            [6., 7.]])
    """
    ### BEGIN SOLUTION
    batch, seq, d_model = x.shape
    x = x.view(batch, seq, num_heads, d_model // num_heads)  # (batch, seq, heads, d_k)
    return x.transpose(1, 2)  # (batch, heads, seq, d_k)
    ### END SOLUTION


def merge_heads(x: Tensor) -> Tensor:
    """The inverse of ``split_heads``: put the heads back side by side on the last axis.

    Args:
        x: (batch, heads, seq, d_k).

    Returns:
        (batch, seq, heads * d_k); ``merge_heads(split_heads(x, h))`` equals ``x``.
    """
    ### BEGIN SOLUTION
    batch, heads, seq, d_k = x.shape
    x = x.transpose(1, 2)  # (batch, seq, heads, d_k)
    return x.reshape(batch, seq, heads * d_k)  # (batch, seq, d_model)
    ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head attention with learned projections W_Q, W_K, W_V and W_O.

    Args:
        d_model: width of the inputs and of the output.
        num_heads: number of heads h; d_model must be divisible by h (d_k = d_model // h).
        dropout: probability of dropping an attention weight in training mode.

    Members (names and shapes are part of the contract): ``w_q``, ``w_k``, ``w_v``, ``w_o``, each an
    ``nn.Linear(d_model, d_model)`` with bias; ``attn_weights``: the weights of the last call,
    (batch, heads, seq_q, seq_k), detached (no graph: kept for plots, they hold no memory of the
    backward pass; None before the first call).

    forward(query, key, value, mask=None):
        query: (batch, seq_q, d_model); key and value: (batch, seq_k, d_model) (all three the same
        tensor for self-attention, key = value = the encoder's output for cross-attention).
        mask: optional bool, True = may attend, broadcastable to (batch, heads, seq_q, seq_k).
        Returns the output, (batch, seq_q, d_model).

    Example:
    >>> import torch
    >>> mha = MultiHeadAttention(d_model=8, num_heads=2).eval()
    >>> x = torch.randn(3, 5, 8)
    >>> mha(x, x, x).shape, mha.attn_weights.shape
    (torch.Size([3, 5, 8]), torch.Size([3, 2, 5, 5]))
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads}): "
                             f"each head gets d_k = d_model / num_heads features")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.attn_weights: Tensor | None = None

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        ### BEGIN SOLUTION
        q = split_heads(self.w_q(query), self.num_heads)  # (batch, heads, seq_q, d_k)
        k = split_heads(self.w_k(key), self.num_heads)  # (batch, heads, seq_k, d_k)
        v = split_heads(self.w_v(value), self.num_heads)  # (batch, heads, seq_k, d_k)
        p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=p)  # (batch, heads, seq_q, d_k)
        self.attn_weights = weights.detach()  # (batch, heads, seq_q, seq_k)
        return self.w_o(merge_heads(heads))  # (batch, seq_q, d_model)
        ### END SOLUTION
