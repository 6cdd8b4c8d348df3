"""Chapter 05 checks, their inputs (a part of tests/specs/ch05.py, loaded by it): a LayerNorm's input, gain and
shift, a feed-forward's or an encoder layer's or stack's weights and masks, all deterministic by seed. Chapters 06
and 08 build their weights with the same makers.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

P = "p:"  # prefix of the inputs that are parameters, e.g. "p:self_attn.w_q.weight"


def _padding(batch: int, seq: int) -> Tensor:
    """A padding mask (batch, 1, 1, seq), True = a real token, a different length per sequence (>= 2)."""
    lengths = seq - torch.arange(batch) % (seq - 1)                      # (batch,) seq, seq - 1, ...
    keep = torch.arange(seq)[None, :] < torch.roll(lengths, 1)[:, None]  # (batch, seq)
    return keep[:, None, None, :]                                        # (batch, 1, 1, seq)


def norm_inputs(seed: int, shape: tuple[int, ...] = (2, 5, 16), eps: float = 1e-5, shift: float = 0.0,
                scale: float = 1.0, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """x of ``shape`` (last axis d_model) with mean ``shift`` and spread ``scale``, a gain and a shift."""
    g = torch.Generator().manual_seed(seed)
    d = shape[-1]
    x = shift + scale * torch.randn(*shape, generator=g, dtype=dtype)   # (..., d_model)
    return {"x": x, f"{P}weight": 1 + 0.5 * torch.randn(d, generator=g, dtype=dtype),
            f"{P}bias": 0.5 * torch.randn(d, generator=g, dtype=dtype), "eps": torch.tensor(eps, dtype=torch.float64)}


def _linear(g: torch.Generator, name: str, d_in: int, d_out: int, dtype: torch.dtype) -> dict[str, Tensor]:
    return {f"{P}{name}.weight": torch.randn(d_out, d_in, generator=g, dtype=dtype) / d_in ** 0.5,
            f"{P}{name}.bias": 0.1 * torch.randn(d_out, generator=g, dtype=dtype)}


def _norm(g: torch.Generator, name: str, d: int, dtype: torch.dtype) -> dict[str, Tensor]:
    return {f"{P}{name}.weight": 1 + 0.2 * torch.randn(d, generator=g, dtype=dtype),
            f"{P}{name}.bias": 0.1 * torch.randn(d, generator=g, dtype=dtype)}


def ffn_inputs(seed: int, batch: int = 2, seq: int = 5, d_model: int = 12, d_ff: int = 24,
               dtype: torch.dtype = torch.float32, lead: tuple[int, ...] | None = None) -> dict[str, Tensor]:
    """x (batch, seq, d_model), or (*lead, d_model) with ``lead``: the FFN takes any leading axes."""
    g = torch.Generator().manual_seed(seed)
    shape = (batch, seq) if lead is None else lead
    inputs = {"x": torch.randn(*shape, d_model, generator=g, dtype=dtype), "d_ff": torch.tensor(d_ff)}
    inputs.update(_linear(g, "linear1", d_model, d_ff, dtype))
    inputs.update(_linear(g, "linear2", d_ff, d_model, dtype))
    return inputs


def _layer(g: torch.Generator, prefix: str, d_model: int, d_ff: int, dtype: torch.dtype,
           cross: bool = False) -> dict[str, Tensor]:
    """The parameters of one encoder layer, or with ``cross`` of a decoder layer (chapter 06), named from ``prefix``."""
    params: dict[str, Tensor] = {}
    for attn in ("self_attn", "cross_attn") if cross else ("self_attn",):
        for name in ("w_q", "w_k", "w_v", "w_o"):
            params.update(_linear(g, f"{prefix}{attn}.{name}", d_model, d_model, dtype))
    params.update(_linear(g, f"{prefix}ffn.linear1", d_model, d_ff, dtype))
    params.update(_linear(g, f"{prefix}ffn.linear2", d_ff, d_model, dtype))
    for i in (1, 2, 3) if cross else (1, 2):
        params.update(_norm(g, f"{prefix}norm{i}", d_model, dtype))
    return params


def _stack(g: torch.Generator, layer: Callable[..., dict[str, Tensor]], layers: int | None, d_model: int, d_ff: int,
           dtype: torch.dtype, norm_first: bool) -> dict[str, Tensor]:
    """One layer's parameters made by ``layer`` (``layers`` None), or ``num_layers`` and each layer's under
    "layers.i.", with the stack's final norm under Pre-LN; drawn from ``g`` in that order."""
    if layers is None:
        return layer(g, "", d_model, d_ff, dtype)
    params = {"num_layers": torch.tensor(layers)}
    for i in range(layers):
        params.update(layer(g, f"layers.{i}.", d_model, d_ff, dtype))
    if norm_first:
        params.update(_norm(g, "norm", d_model, dtype))
    return params


def layer_inputs(seed: int, batch: int = 2, seq: int = 5, d_model: int = 12, heads: int = 3, d_ff: int = 24,
                 norm_first: bool = False, layers: int | None = None, mask: bool | str = False,
                 dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """x (batch, seq, d_model), the weights of one EncoderLayer (``layers`` None) or of an Encoder of
    ``layers`` layers (plus its final norm for Pre-LN), and with ``mask`` a padding mask (batch, 1, 1, seq),
    or with ``mask="causal"`` the padding and a causal mask at once, (batch, 1, seq, seq): an EncoderLayer
    takes any mask broadcastable to (batch, heads, seq, seq)."""
    g = torch.Generator().manual_seed(seed)
    inputs = {"x": torch.randn(batch, seq, d_model, generator=g, dtype=dtype), "num_heads": torch.tensor(heads),
              "d_ff": torch.tensor(d_ff), "norm_first": torch.tensor(norm_first)}
    inputs.update(_stack(g, _layer, layers, d_model, d_ff, dtype, norm_first))
    if mask:
        inputs["mask"] = _padding(batch, seq)                            # (batch, 1, 1, seq)
    if mask == "causal":
        inputs["mask"] = inputs["mask"] & torch.tril(torch.ones(seq, seq, dtype=torch.bool))  # (batch, 1, seq, seq)
    return inputs
