# course_lib/transformer.py: yours to fill in. Replace each `raise NotImplementedError(...)` with your code;
# the docstrings say what to compute. Check your work with `make check CH=06`.
# Generated from solutions/course_ref/transformer.py by `course release`: instructors edit solutions/, never this file.
"""Chapter 06 — The encoder–decoder Transformer, assembled from the chapters before.

    src tokens -> src_embed -> positional -> encoder ----------------------.  memory
    tgt tokens -> tgt_embed -> positional -> decoder (masked self-attn, cross-attn to memory) -> generator
                                                                                      -> logits over tgt vocab

``TransformerConfig.base(src_vocab, tgt_vocab)`` has the sizes of the paper's base model (Table 3):
d_model 512, 8 heads, d_ff 2048, 6 encoder and 6 decoder layers, with the embeddings tied as in
section 3.4, and dropout 0.1, which the course applies in four places where the paper (section 5.4)
uses two (chapter 05 says which). Masks follow the course's convention, True = may attend; ``forward`` builds them from
``pad_id``.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from .decoder import Decoder
from .encoder import Encoder
from .masks import padding_mask, target_mask
from .positional import PositionalEncoding, TokenEmbedding


@dataclass
class TransformerConfig:
    """The sizes of a Transformer.

    Fields:
        src_vocab, tgt_vocab: the number of source and target token ids.
        d_model, num_heads, d_ff: widths (d_model divisible by num_heads, and even).
        num_layers: the number of encoder layers, and of decoder layers.
        dropout: one rate for four places: after the positional encoding and on every sublayer's output (the
            paper's P_drop, section 5.4), and on the attention weights and the feed-forward's hidden units
            (added, as torch.nn and The Annotated Transformer do; off in evaluation, where the checks run).
        max_len: the longest sequence the positional encoding accepts.
        pad_id: the padding token's id, in both vocabularies; ``forward`` masks it out.
        norm_first: False for Post-LN (the paper), True for Pre-LN (chapter 05).
        tie_embeddings: the generator's weight *is* the target embedding's weight (one Parameter).
        share_embeddings: the source and target embeddings are one module (needs src_vocab == tgt_vocab).
    """

    src_vocab: int
    tgt_vocab: int
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    dropout: float = 0.1
    max_len: int = 5000
    pad_id: int = 0
    norm_first: bool = False
    tie_embeddings: bool = False
    share_embeddings: bool = False

    @classmethod
    def base(cls, src_vocab: int, tgt_vocab: int) -> TransformerConfig:
        """The paper's base model's sizes (the defaults above), the generator tied to the target embedding,
        and one embedding for both sides when the vocabulary is shared (src_vocab == tgt_vocab). Its dropout
        0.1 also falls on the attention weights and the feed-forward's hidden units, where the paper has none
        (see ``dropout`` above): the parameters are the paper's, the regularization is a little stronger."""
        raise NotImplementedError("Chapter 06: implement TransformerConfig.base in course_lib/transformer.py (book chapter 06, exercises/ch06_decoder_and_masks)")


class Transformer(nn.Module):
    """The encoder–decoder Transformer of "Attention Is All You Need", returning logits.

    Args:
        config: a TransformerConfig.

    Members (part of the contract): ``src_embed``, ``tgt_embed`` (TokenEmbedding; the same module when
    ``share_embeddings``), ``positional`` (PositionalEncoding, shared by both sides), ``encoder``
    (Encoder), ``decoder`` (Decoder), ``generator`` (nn.Linear(d_model, tgt_vocab), whose weight is
    ``tgt_embed.embedding.weight`` when ``tie_embeddings``), ``config``.
    Raises ValueError when share_embeddings is asked with two vocabulary sizes.

    encode(src, src_mask): src (batch, src_seq) int64, src_mask (batch, 1, 1, src_seq) bool
        -> memory (batch, src_seq, d_model).
    decode(tgt, memory, src_mask, tgt_mask): tgt (batch, tgt_seq) int64, memory from ``encode``,
        tgt_mask (batch, 1, tgt_seq, tgt_seq) bool -> (batch, tgt_seq, d_model), before the generator.
    forward(src, tgt): builds src_mask = padding_mask(src, pad_id) and tgt_mask = target_mask(tgt, pad_id),
        encodes, decodes and applies the generator -> logits (batch, tgt_seq, tgt_vocab) (no softmax).
        Position t of the output depends on tgt[:, :t+1] only: the prediction of token t + 1.

    Example:
    >>> import torch
    >>> model = Transformer(TransformerConfig(src_vocab=11, tgt_vocab=13, d_model=16, num_heads=4,
    ...                                       d_ff=32, num_layers=2)).eval()
    >>> model(torch.randint(1, 11, (2, 7)), torch.randint(1, 13, (2, 5))).shape
    torch.Size([2, 5, 13])
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = self.config = config
        if c.share_embeddings and c.src_vocab != c.tgt_vocab:
            raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab {c.src_vocab} and "
                             f"tgt_vocab {c.tgt_vocab}")
        self.src_embed = TokenEmbedding(c.src_vocab, c.d_model)
        self.tgt_embed = self.src_embed if c.share_embeddings else TokenEmbedding(c.tgt_vocab, c.d_model)
        self.positional = PositionalEncoding(c.d_model, c.dropout, c.max_len)
        self.encoder = Encoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
        self.decoder = Decoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab)
        # Weight tying (section 3.4): with config.tie_embeddings, the generator's weight becomes the
        # target embedding's weight, the same nn.Parameter (not a copy).
        raise NotImplementedError("Chapter 06: implement Transformer.__init__ in course_lib/transformer.py (book chapter 06, exercises/ch06_decoder_and_masks)")

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Embed the source, add positions, run the encoder: (batch, src_seq) -> memory (batch, src_seq, d_model).

        src_mask: the source's padding mask (batch, 1, 1, src_seq), True = a real token.
        """
        raise NotImplementedError("Chapter 06: implement Transformer.encode in course_lib/transformer.py (book chapter 06, exercises/ch06_decoder_and_masks)")

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,
               tgt_mask: Tensor | None = None) -> Tensor:
        """Embed the target, add positions, run the decoder: (batch, tgt_seq) -> (batch, tgt_seq, d_model).

        memory (batch, src_seq, d_model) comes from ``encode``; src_mask goes to the cross-attention and
        tgt_mask (batch, 1, tgt_seq, tgt_seq) to the self-attention. Chapter 07's greedy decoding calls
        this once per generated token, with the memory computed once.
        """
        raise NotImplementedError("Chapter 06: implement Transformer.decode in course_lib/transformer.py (book chapter 06, exercises/ch06_decoder_and_masks)")

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Logits (batch, tgt_seq, tgt_vocab) for src (batch, src_seq) and tgt (batch, tgt_seq) token ids.

        Builds the masks from config.pad_id (padding_mask of src, target_mask of tgt), encodes, decodes
        and applies the generator; no softmax.
        """
        raise NotImplementedError("Chapter 06: implement Transformer.forward in course_lib/transformer.py (book chapter 06, exercises/ch06_decoder_and_masks)")
