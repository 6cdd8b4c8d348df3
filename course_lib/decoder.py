# course_lib/decoder.py: yours to fill in. Replace each `raise NotImplementedError(...)` with your code;
# the docstrings say what to compute. Check your work with `make check CH=06`.
# Generated from solutions/course_ref/decoder.py by `course release`: instructors edit solutions/, never this file.
"""Chapter 06 — Decoder: the decoder layer, with masked self-attention and cross-attention, and its stack.

    Post-LN (the paper, section 3.1):   x = LayerNorm(x + Sublayer(x))
    Pre-LN  (norm_first=True):          x = x + Sublayer(LayerNorm(x)), and one LayerNorm after the stack

Each decoder layer has three sublayers: masked self-attention over the target (a position sees
itself and the positions before it), cross-attention (queries from the decoder, keys and values from
the encoder's output, the *memory*) and the position-wise feed-forward network. Each is wrapped in a
residual connection, dropout and a layer norm, exactly as in chapter 05's encoder layer.

Mask convention (the whole course): a boolean tensor, True = may attend, broadcastable to
(batch, heads, seq_q, seq_k). tgt_mask: (batch, 1, tgt_seq, tgt_seq) or (tgt_seq, tgt_seq);
memory_mask: the source's padding mask (batch, 1, 1, src_seq).
"""
from __future__ import annotations

from torch import Tensor, nn

from .encoder import LayerNorm, PositionwiseFeedForward
from .multihead import MultiHeadAttention


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention, feed-forward; residual and norm each.

    Post-LN (norm_first=False, the paper):
        x = norm1(x + drop(self_attn(x, x, x, tgt_mask)))
        x = norm2(x + drop(cross_attn(x, memory, memory, memory_mask)))
        x = norm3(x + drop(ffn(x)))
    Pre-LN (norm_first=True):
        x = x + drop(self_attn(h, h, h, tgt_mask)),             h = norm1(x)
        x = x + drop(cross_attn(h, memory, memory, memory_mask)),  h = norm2(x)
        x = x + drop(ffn(norm3(x)))

    Args:
        d_model, num_heads: as for MultiHeadAttention (d_model divisible by num_heads).
        d_ff: hidden width of the feed-forward network.
        dropout: on each sublayer's output, inside the FFN and on the attention weights (training only).
        norm_first: False for Post-LN (the paper's layer), True for Pre-LN.

    Members: ``self_attn``, ``cross_attn`` (MultiHeadAttention), ``ffn`` (PositionwiseFeedForward),
    ``norm1``, ``norm2``, ``norm3`` (LayerNorm), ``dropout`` (nn.Dropout), ``norm_first``.

    forward(x, memory, tgt_mask=None, memory_mask=None):
        x: (batch, tgt_seq, d_model), the embedded target.
        memory: (batch, src_seq, d_model), the encoder's output; src_seq may differ from tgt_seq.
        tgt_mask: optional bool, True = may attend, for the self-attention: a target mask
            (batch, 1, tgt_seq, tgt_seq) or a causal mask (tgt_seq, tgt_seq).
        memory_mask: optional bool, True = may attend, for the cross-attention: the source's
            padding mask (batch, 1, 1, src_seq).
        Returns (batch, tgt_seq, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        raise NotImplementedError("Chapter 06: implement DecoderLayer.forward in course_lib/decoder.py (book chapter 06, exercises/ch06_decoder_and_masks)")


class Decoder(nn.Module):
    """A stack of ``num_layers`` decoder layers; with Pre-LN, one more LayerNorm at the end.

    Args: ``num_layers`` and those of DecoderLayer, which every layer gets.

    Members: ``layers`` (nn.ModuleList of DecoderLayer); ``norm``: a LayerNorm(d_model) for Pre-LN
    (norm_first=True) and **None** for Post-LN, whose last layer already ends with a norm (as in
    chapter 05's Encoder).

    forward(x, memory, tgt_mask=None, memory_mask=None):
        x: (batch, tgt_seq, d_model), the embedded and position-encoded target tokens.
        memory: (batch, src_seq, d_model), the encoder's output, the same for every layer.
        tgt_mask, memory_mask: as for DecoderLayer, given unchanged to every layer.
        Returns (batch, tgt_seq, d_model).

    Example:
    >>> import torch
    >>> dec = Decoder(num_layers=2, d_model=16, num_heads=4, d_ff=32).eval()
    >>> dec(torch.randn(1, 3, 16), torch.randn(1, 5, 16), tgt_mask=torch.ones(3, 3).tril().bool()).shape
    torch.Size([1, 3, 16])
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None) -> Tensor:
        raise NotImplementedError("Chapter 06: implement Decoder.forward in course_lib/decoder.py (book chapter 06, exercises/ch06_decoder_and_masks)")
