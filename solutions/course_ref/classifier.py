"""Chapter 08 — Capstone: a Transformer encoder that tells negative from positive reviews.

    tokens -> TokenEmbedding (× √d_model) -> PositionalEncoding -> Encoder (with a padding mask)
           -> masked mean over the real tokens -> Linear -> logits

A batch of reviews is padded to its longest one with ``pad_id``. Padding must change nothing: the
self-attention may not look at it (a padding mask, chapters 02-05) and the pooling may not average it
in (``masked_mean``). Adding more padding columns to a batch therefore leaves every logit unchanged.

Mask convention (the whole course): a boolean tensor, True = may attend. Here the padding mask comes
in two shapes: (batch, seq), True = a real token, for the pooling and the training harness; and
``mask[:, None, None, :]`` (batch, 1, 1, seq) for the encoder's attention.
"""
from __future__ import annotations

from torch import Tensor, nn

from .encoder import Encoder
from .positional import PositionalEncoding, TokenEmbedding


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """The mean of ``x`` over the real positions of each sequence; padding is left out.

    Args:
        x: (batch, seq, d_model), any float dtype.
        mask: (batch, seq) bool, True = a real token, False = padding.

    Returns:
        (batch, d_model), the dtype of x: row b is the mean of x[b, t] over the t where mask[b, t] is
        True. A row with no real token at all gives zeros (finite, never NaN).

    Example:
    >>> import torch
    >>> x = torch.tensor([[[1., 2.], [3., 4.], [100., 100.]]])     # the third position is padding
    >>> masked_mean(x, torch.tensor([[True, True, False]]))
    tensor([[2., 3.]])
    """
    ### BEGIN SOLUTION
    keep = mask.unsqueeze(-1)  # (batch, seq, 1)
    total = x.masked_fill(~keep, 0.0).sum(dim=1)  # (batch, d_model): padding contributes 0
    count = keep.sum(dim=1).clamp(min=1).to(x.dtype)  # (batch, 1): real tokens, at least 1
    return total / count  # (batch, d_model)
    ### END SOLUTION


class TransformerClassifier(nn.Module):
    """A sentence classifier: chapter 04's embeddings, chapter 05's encoder, a masked mean and a linear head.

    Args:
        vocab_size: number of token ids (the vocabulary's size, specials included).
        d_model, num_heads, d_ff, num_layers, dropout, norm_first: as for chapter 05's Encoder.
        num_classes: number of labels (2: negative, positive).
        max_len: longest sequence the positional encoding accepts.
        pad_id: the id that pads a batch; tokens equal to it are padding.

    Members (the checks load weights by these names): ``embed`` (TokenEmbedding), ``positional``
    (PositionalEncoding), ``encoder`` (Encoder), ``head`` (nn.Linear(d_model, num_classes)); and the
    plain attributes ``d_model`` and ``pad_id``.

    encode(tokens, mask=None) -> hidden (batch, seq, d_model), the encoder's output (what masked-LM
        pretraining trains); tokens (batch, seq) long; mask (batch, seq) bool, True = a real token,
        by default ``tokens != pad_id``. Values at padded positions are computed but mean nothing.
    forward(tokens, mask=None) -> logits (batch, num_classes), unnormalised (feed them to
        cross-entropy); the pooled vector is ``masked_mean(hidden, mask)``.

    Example:
    >>> import torch
    >>> model = TransformerClassifier(vocab_size=10, d_model=16, num_heads=4, d_ff=32, num_layers=2).eval()
    >>> tokens = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])          # two reviews, padded with 0
    >>> model(tokens).shape
    torch.Size([2, 2])
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 num_classes: int = 2, dropout: float = 0.1, max_len: int = 512, pad_id: int = 0,
                 norm_first: bool = False) -> None:
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, dropout=dropout, max_len=max_len)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout=dropout, norm_first=norm_first)
        self.head = nn.Linear(d_model, num_classes)

    def encode(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        ### BEGIN SOLUTION
        if mask is None:
            mask = tokens != self.pad_id  # (batch, seq) True = a real token
        x = self.positional(self.embed(tokens))  # (batch, seq, d_model), embeddings × √d_model + PE
        return self.encoder(x, mask=mask[:, None, None, :])  # (batch, seq, d_model); mask (batch, 1, 1, seq)
        ### END SOLUTION

    def forward(self, tokens: Tensor, mask: Tensor | None = None) -> Tensor:
        ### BEGIN SOLUTION
        if mask is None:
            mask = tokens != self.pad_id  # (batch, seq)
        hidden = self.encode(tokens, mask)  # (batch, seq, d_model)
        return self.head(masked_mean(hidden, mask))  # (batch, d_model) -> (batch, num_classes)
        ### END SOLUTION
