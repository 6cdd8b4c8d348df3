"""Chapter 04 — Positional encoding: tell attention where each token stands, and scale the embeddings.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))        ("Attention Is All You Need", section 3.5)

Self-attention alone ignores order: permute the tokens and its output is permuted the same way. Adding a
different vector to each position breaks that symmetry. The token embeddings are multiplied by √d_model
before the encoding is added (section 3.4).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The sinusoidal positional encodings of positions 0 … max_len - 1.

    Args:
        max_len: the number of positions.
        d_model: the width of each encoding; must be even (each frequency fills a sin and a cos
            column). An odd d_model raises ValueError.

    Returns:
        (max_len, d_model) float32: row ``pos`` holds PE(pos); column 2i is sin(pos · ω_i) and
        column 2i+1 is cos(pos · ω_i), with the frequency ω_i = 1 / 10000^(2i / d_model).

    Steps: positions (max_len, 1) times frequencies (d_model/2,) give the angles (max_len, d_model/2);
    their sines go to the even columns, their cosines to the odd ones. The exponent is 2i / d_model,
    where 2i is the even column index, not i. (The reference computes the angles in float64 before
    casting, so that positions in the thousands keep their precision; float32 is close enough here.)

    Example: position 0 is [sin 0, cos 0, sin 0, cos 0, …]:
    >>> import torch
    >>> sinusoidal_table(3, 4)[0]
    tensor([0., 1., 0., 1.])
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}: each frequency fills two columns, "
                         "sin in column 2i and cos in column 2i+1")
    ### BEGIN SOLUTION
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,) the even columns 2i
    frequency = torch.exp(-math.log(10000.0) * two_i / d_model)  # (d_model/2,) 1 / 10000^(2i/d_model)
    angle = position * frequency  # (max_len, d_model/2)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()  # (max_len, d_model)
    ### END SOLUTION


class PositionalEncoding(nn.Module):
    """Add the sinusoidal encoding of each position to a batch of embeddings, then apply dropout.

    Args:
        d_model: the width of the embeddings (even).
        dropout: the probability of zeroing an element of the sum in training mode (the paper's
            P_drop = 0.1); off in evaluation mode.
        max_len: the longest sequence the module accepts.

    Members (part of the contract): ``pe``, a *buffer* (not a parameter: it is never trained) of
    shape (1, max_len, d_model) holding ``sinusoidal_table(max_len, d_model)``; being a buffer, it
    moves with ``.to()``. Whether ``state_dict()`` saves it (``persistent=False`` leaves it out) is yours
    to choose: the table is built again with every module, so either way no output, loss or gradient
    changes. ``dropout``: the ``nn.Dropout`` layer.

    forward(x):
        x: (batch, seq, d_model), any seq up to max_len.
        Returns dropout(x + pe[:, :seq]), (batch, seq, d_model), in x's dtype.
        Raises ValueError, naming seq and max_len, when seq > max_len.

    Example:
    >>> import torch
    >>> pos = PositionalEncoding(d_model=4, max_len=10).eval()
    >>> pos(torch.zeros(1, 2, 4))       # the rows PE(0) and PE(1) themselves
    tensor([[[0.0000, 1.0000, 0.0000, 1.0000],
             [0.8415, 0.5403, 0.0100, 0.9999]]])
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        ### BEGIN SOLUTION
        table = sinusoidal_table(max_len, d_model)  # (max_len, d_model)
        self.register_buffer("pe", table.unsqueeze(0))  # (1, max_len, d_model)
        ### END SOLUTION

    def forward(self, x: Tensor) -> Tensor:
        ### BEGIN SOLUTION
        seq = x.size(1)
        if seq > self.max_len:
            raise ValueError(f"sequence length {seq} is longer than max_len {self.max_len} of this "
                             f"PositionalEncoding: build it with PositionalEncoding(d_model, max_len={seq}) "
                             "or larger")
        x = x + self.pe[:, :seq].to(x.dtype)  # (batch, seq, d_model)
        return self.dropout(x)
        ### END SOLUTION


class TokenEmbedding(nn.Module):
    """Look up a learned vector for each token id and multiply it by √d_model (section 3.4).

    Args:
        vocab_size: the number of token ids.
        d_model: the width of each vector.

    Members (part of the contract): ``embedding``, an ``nn.Embedding(vocab_size, d_model)`` whose
    weight (vocab_size, d_model) starts as N(0, 1/d_model), so that the scaled vectors have entries
    of standard deviation about 1, on the scale of the positional encoding's entries.

    forward(tokens):
        tokens: (batch, seq) int64 token ids.
        Returns (batch, seq, d_model) float: embedding(tokens) · √d_model.

    Example:
    >>> import torch
    >>> emb = TokenEmbedding(vocab_size=10, d_model=4)
    >>> torch.equal(emb(torch.tensor([[3]]))[0, 0], emb.embedding.weight[3] * 2)   # √4 = 2
    True
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)

    def forward(self, tokens: Tensor) -> Tensor:
        ### BEGIN SOLUTION
        return self.embedding(tokens) * math.sqrt(self.d_model)  # (batch, seq, d_model)
        ### END SOLUTION
