"""Chapter 06 — Masks: which keys each query may attend to.

Mask convention (the whole course): a boolean tensor, **True = may attend**, broadcastable to the
attention scores' shape (batch, heads, seq_q, seq_k); the convention of
torch.nn.functional.scaled_dot_product_attention. (PyTorch's nn.Transformer* layers use the opposite:
their masks say True = NOT allowed.)

    padding mask  (batch, 1, 1, seq_k)   a key that is padding is never attended to
    causal mask   (seq, seq)             query i sees keys 0 .. i, itself included ("no peeking ahead")
    target mask   (batch, 1, seq, seq)   both at once: the decoder's self-attention mask
"""
from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """True where a key is a real token, False where it is padding; one row per sequence.

    Args:
        tokens: (batch, seq) int64 token ids.
        pad_id: the id of the padding token.

    Returns:
        (batch, 1, 1, seq) bool: ``[b, 0, 0, j]`` is True when ``tokens[b, j] != pad_id``. The two
        axes of size 1 broadcast over the heads and over the *queries*: the mask is on the keys.

    Example:
    >>> import torch
    >>> padding_mask(torch.tensor([[5, 7, 0]]), pad_id=0)
    tensor([[[[ True,  True, False]]]])
    """
    ### BEGIN SOLUTION
    return (tokens != pad_id)[:, None, None, :]  # (batch, seq) -> (batch, 1, 1, seq)
    ### END SOLUTION


def causal_mask(n: int, device: torch.device | str | None = None) -> Tensor:
    """The lower-triangular mask of a sequence of ``n`` positions: query i may attend to keys j <= i.

    Args:
        n: the sequence length.
        device: where to create the mask (default: the CPU).

    Returns:
        (n, n) bool, True on and below the diagonal. The diagonal is True: a position sees itself.

    Example:
    >>> import torch
    >>> causal_mask(3)
    tensor([[ True, False, False],
            [ True,  True, False],
            [ True,  True,  True]])
    """
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(n, n, dtype=torch.bool, device=device))  # (n, n)
    ### END SOLUTION


def target_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """The decoder's self-attention mask: a key may be attended to when it is not padding AND not ahead.

    Args:
        tokens: (batch, seq) int64 target token ids (the decoder's input).
        pad_id: the id of the padding token.

    Returns:
        (batch, 1, seq, seq) bool: ``padding_mask(tokens, pad_id) & causal_mask(seq)``, on the tokens'
        device. A query row can be all False (a sequence that starts with padding); the attention
        still gives finite values there (chapter 02).

    Example:
    >>> import torch
    >>> target_mask(torch.tensor([[5, 7, 0]]), pad_id=0)[0, 0]
    tensor([[ True, False, False],
            [ True,  True, False],
            [ True,  True, False]])
    """
    ### BEGIN SOLUTION
    pad = padding_mask(tokens, pad_id)  # (batch, 1, 1, seq)
    causal = causal_mask(tokens.size(1), device=tokens.device)  # (seq, seq)
    return pad & causal  # (batch, 1, seq, seq)
    ### END SOLUTION
