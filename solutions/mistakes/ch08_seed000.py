"""Seed 000's sentiment classifier (`MiniTransformerClassifier`), transcribed faithfully for chapter 08.

The seed's tutorial ends with a 90-line encoder classifier. Its code is kept here line for line, adapted
only to the contract's names and signature (members ``embed.embedding``, ``positional``,
``encoder.layers.i.self_attn.w_q`` ... ``head``; ``masked_mean`` and ``encode``) so that the checks can
load their weights into it. It carries the mistakes chapter 08 corrects:

* the pooling is ``nn.AdaptiveAvgPool1d(1)`` over every position: padding is averaged in;
* the encoder layers take no mask at all: real tokens attend to padding;
* the embeddings are not multiplied by √d_model;
* its text describes Post-LN (norm after the residual sum) while its layer computes Pre-LN, without the
  final norm a Pre-LN stack needs; ``norm_first`` and ``pad_id`` are accepted and ignored;
* its attention fills masked scores with -inf (a fully masked row would become NaN), never reached
  here because no mask is ever given.

solutions/tests/checks/test_ch08_seed000.py submits it to the checks; book/08_capstone.md measures its pooling.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1).float()
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))  # (1, max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pe[:, :x.size(1), :]


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)   # the seed's wq, wk, wv and fc
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        batch, seq_len, _ = x.size()
        q = self.w_q(x).view(batch, seq_len, self.num_heads, self.d_k).transpose(1, 2)
        k = self.w_k(x).view(batch, seq_len, self.num_heads, self.d_k).transpose(1, 2)
        v = self.w_v(x).view(batch, seq_len, self.num_heads, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).contiguous().view(batch, seq_len, self.d_model)
        return self.w_o(out)


class FeedForward(nn.Module):
    """The seed's nn.Sequential(Linear, ReLU, Linear), with the contract's member names."""

    def __init__(self, d_model: int, dim_ff: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, dim_ff), nn.Linear(dim_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(torch.relu(self.linear1(x)))


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dim_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = SelfAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, dim_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.self_attn(self.norm1(x)))
        x = x + self.dropout(self.ffn(self.norm2(x)))
        return x


class _Holder(nn.Module):
    """A container that only gives the seed's modules the contract's names (embed.embedding, encoder.layers)."""


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """The seed's pooling: nn.AdaptiveAvgPool1d(1) over (batch, d_model, seq); the mask is not used."""
    return nn.AdaptiveAvgPool1d(1)(x.transpose(1, 2)).squeeze(-1)


class TransformerClassifier(nn.Module):
    """MiniTransformerClassifier of seed 000 under the contract's signature."""

    def __init__(self, vocab_size: int, d_model: int = 64, num_heads: int = 4, d_ff: int = 128, num_layers: int = 2,
                 num_classes: int = 2, dropout: float = 0.1, max_len: int = 512, pad_id: int = 0,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = _Holder()
        self.embed.embedding = nn.Embedding(vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, max_len)
        self.encoder = _Holder()
        self.encoder.layers = nn.ModuleList([TransformerEncoderLayer(d_model, num_heads, d_ff, dropout)
                                             for _ in range(num_layers)])
        self.pooler = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(d_model, num_classes)

    def encode(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.embed.embedding(tokens)
        x = self.positional(x)
        for layer in self.encoder.layers:
            x = layer(x)
        return x

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.encode(tokens).transpose(1, 2)  # (batch, d_model, seq_len)
        x = self.pooler(x).squeeze(-1)           # the mean over every position: the sentence vector
        return self.head(x)
