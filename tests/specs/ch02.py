"""Chapter 02 checks: scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0).

Public cases use the seeds below; the grader adds hidden cases with other seeds and shapes.
Expected outputs come from the reference implementation (tests/reference/ch02.pt, `course refs`).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "02"
TITLE = "Attention"
MODULES = ["attention.py"]  # the learner's files this chapter grades


# ---------------------------------------------------------------- inputs (deterministic by seed)
def qkv(seed: int, lead: tuple[int, ...], seq_q: int, seq_k: int, d_k: int, d_v: int,
        dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "query": torch.randn(*lead, seq_q, d_k, generator=g, dtype=dtype),  # (..., seq_q, d_k)
        "key": torch.randn(*lead, seq_k, d_k, generator=g, dtype=dtype),    # (..., seq_k, d_k)
        "value": torch.randn(*lead, seq_k, d_v, generator=g, dtype=dtype),  # (..., seq_k, d_v)
    }


def plain(seed: int, lead: tuple[int, ...] = (2,), seq_q: int = 5, seq_k: int = 6, d_k: int = 8,
          d_v: int = 4, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    return qkv(seed, lead, seq_q, seq_k, d_k, d_v, dtype)


def with_padding(seed: int, batch: int = 3, heads: int = 2, seq: int = 6, d_k: int = 8, d_v: int = 4,
                 dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    inputs = qkv(seed, (batch, heads), seq, seq, d_k, d_v, dtype)
    lengths = torch.arange(batch) % (seq - 1) + 2                  # (batch,) each >= 2 valid keys
    mask = torch.arange(seq)[None, :] < lengths[:, None]           # (batch, seq_k)
    inputs["mask"] = mask[:, None, None, :]                        # (batch, 1, 1, seq_k)
    return inputs


def with_causal(seed: int, batch: int = 2, heads: int = 3, seq: int = 5, d_k: int = 8, d_v: int = 6,
                dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    inputs = qkv(seed, (batch, heads), seq, seq, d_k, d_v, dtype)
    inputs["mask"] = torch.tril(torch.ones(seq, seq, dtype=torch.bool))  # (seq_q, seq_k)
    return inputs


def with_empty_rows(seed: int, batch: int = 2, seq_q: int = 4, seq_k: int = 5, d_k: int = 8, d_v: int = 4,
                    dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    inputs = qkv(seed, (batch,), seq_q, seq_k, d_k, d_v, dtype)
    g = torch.Generator().manual_seed(seed + 1)
    mask = torch.rand(batch, seq_q, seq_k, generator=g) > 0.3      # (batch, seq_q, seq_k)
    mask[:, 0, 0] = True
    mask[0, 1, :] = False                                          # a fully masked query row
    mask[1, -1, :] = False
    inputs["mask"] = mask
    return inputs


MASK_SHAPES = {  # every mask shape the docstring promises, beyond (batch, 1, 1, seq_k) and (seq_q, seq_k)
    "keys": lambda b, h, q, k: (k,),              # (seq_k,): the same keys hidden for every query
    "queries": lambda b, h, q, k: (b, 1, q, k),   # (batch, 1, seq_q, seq_k): shared by the heads
    "heads": lambda b, h, q, k: (b, h, q, k),     # (batch, heads, seq_q, seq_k): one per head
}


def with_mask(seed: int, shape: str, batch: int = 2, heads: int = 3, seq_q: int = 4, seq_k: int = 6, d_k: int = 8,
              d_v: int = 5) -> dict[str, Tensor]:
    """Inputs with (batch, heads) leading dims and a random mask of the shape MASK_SHAPES[shape]."""
    inputs = qkv(seed, (batch, heads), seq_q, seq_k, d_k, d_v)
    g = torch.Generator().manual_seed(seed + 1)
    mask = torch.rand(MASK_SHAPES[shape](batch, heads, seq_q, seq_k), generator=g) > 0.4
    mask[..., 0] = True                                            # every query keeps a key
    inputs["mask"] = mask
    return inputs


def fully_masked_rows(inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rows whose every key is masked: their values are not graded, only their finiteness."""
    mask = inputs["mask"]
    empty = ~mask.any(dim=-1, keepdim=True)                        # (..., seq_q, 1)
    return {"output": empty, "weights": empty}


# ---------------------------------------------------------------- probes (they call your code)
def _attend(impl, inputs: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    fn = impl.attention.scaled_dot_product_attention
    args = (inputs["query"], inputs["key"], inputs["value"])
    result = fn(*args, mask=inputs["mask"]) if "mask" in inputs else fn(*args)
    if not isinstance(result, tuple) or len(result) != 2:
        got = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise CheckFailure("scaled_dot_product_attention should return a tuple (output, weights), got {got}", got=got)
    return result


def forward(impl, inputs: dict[str, Tensor]) -> Outputs:
    output, weights = _attend(impl, inputs)
    return {"output": output, "weights": weights}


def untouched(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The inputs as they are after the call (they must not have changed), and the call's output."""
    output, _ = _attend(impl, inputs)
    return {**inputs, "output": output}


def depends_on_query(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """Checked with the comparison, never beside your code: the output is computed, not constant (rows of
    different queries differ), so that code that returns zeros does not earn the untouched case."""
    output = outputs["output"]                                     # (..., seq_q, d_v)
    if torch.allclose(output, output[..., :1, :].expand_as(output)):
        return {"same_for_every_query": _("the output is the same for every query: compute it from query, key and value")}
    return {}


def gradients(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Backpropagate a fixed random weighting of both outputs to query, key and value."""
    g = torch.Generator().manual_seed(7)
    for name in ("query", "key", "value"):
        inputs[name].requires_grad_(True)
    output, weights = _attend(impl, inputs)
    if not (isinstance(output, Tensor) and isinstance(weights, Tensor)):
        raise CheckFailure("output and weights must be tensors")
    loss = (output * torch.randn(output.shape, generator=g)).sum() + (weights * torch.randn(weights.shape, generator=g)).sum()
    if not loss.requires_grad:
        raise CheckFailure("no gradient flows back from the outputs: did you detach, use .data, or go through numpy?")
    loss.backward()
    grads = {}
    for name in ("query", "key", "value"):
        if inputs[name].grad is None:
            raise CheckFailure("no gradient reached {names}: keep every step in torch operations", names=name)
        grads[f"grad_{name}"] = inputs[name].grad
    return grads


# ---------------------------------------------------------------- dropout on the attention weights
def with_dropout(seed: int, p: float = 0.25, lead: tuple[int, ...] = (4, 4), seq: int = 16, d_k: int = 8,
                 d_v: int = 4) -> dict[str, Tensor]:
    """Inputs without a mask (every weight > 0) and the dropout probability ``dropout_p``."""
    return {**qkv(seed, lead, seq, seq, d_k, d_v), "dropout_p": torch.tensor(p, dtype=torch.float64)}


def dropout(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The call with dropout_p = 0 (compared with the reference), then with dropout_p > 0 on a seeded generator
    (judged by ``dropout_on_weights``: which weights are dropped depends on how your code draws them)."""
    fn, args = impl.attention.scaled_dot_product_attention, (inputs["query"], inputs["key"], inputs["value"])
    result = fn(*args, dropout_p=0.0)
    torch.manual_seed(2)
    dropped = fn(*args, dropout_p=float(inputs["dropout_p"]))
    for got in (result, dropped):
        if not isinstance(got, tuple) or len(got) != 2:
            raise CheckFailure("scaled_dot_product_attention should return a tuple (output, weights)")
    return {"output": result[0], "weights": result[1], "training_output": dropped[0], "training_weights": dropped[1]}


# Each weight is dropped with probability p, independently: over the N weights of the case the share dropped has
# the binomial standard error sqrt(p (1 - p) / N) (0.0068 for p = 0.25 and the 4096 weights of the public case).
# A share more than 5 standard errors from p is a wrong rate; a right one lands there once in 1.7 million draws.
RATE_SE = 5.0


def dropped_weights(weights: Tensor, dropped: Tensor, p: float) -> dict[str, str]:
    """What dropout with probability ``p`` must do to attention ``weights`` (all > 0), whichever it drops:
    {property: message} of those that ``dropped`` breaks (chapters 03 and 05 use it too)."""
    if dropped.shape != weights.shape:
        return {"shape": _("with dropout the attention weights must keep their shape")}
    zero = dropped == 0
    if not bool(zero.any()):
        broken = {"none_dropped": _("with dropout > 0 no attention weight was zeroed")}
        if torch.allclose(dropped, weights, rtol=1e-5, atol=1e-7):
            broken["unchanged"] = _("with dropout > 0 the attention weights are those without dropout")
        return broken
    broken = {}
    share, se = float(zero.double().mean()), math.sqrt(p * (1 - p) / zero.numel())
    if abs(share - p) > RATE_SE * se:
        broken["rate"] = _("{share} of the weights were zeroed, expected the dropout probability {p} (within "
                           "{within})").format(share=f"{share:.3f}", p=f"{p:g}", within=f"{RATE_SE * se:.3f}")
    kept = ~zero
    if torch.allclose(dropped[kept], weights[kept], rtol=1e-5, atol=1e-7):
        broken["not_rescaled"] = _("the weights kept are unchanged: they must be divided by 1 - p")
    elif not torch.allclose(dropped[kept], weights[kept] / (1 - p), rtol=1e-4, atol=1e-6):
        broken["kept_values"] = _("the weights kept are not the weights without dropout divided by 1 - p")
    return broken


def dropout_on_weights(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """Checked with the comparison, never beside your code: what dropout on the weights must do, whichever
    weights it drops. The properties are facts about the outputs; the known mistakes name their causes."""
    dropped, output = outputs["training_weights"], outputs["training_output"]
    broken = dropped_weights(outputs["weights"], dropped, float(inputs["dropout_p"]))
    if "shape" not in broken and output.shape == outputs["output"].shape \
            and not torch.allclose(output, dropped @ inputs["value"], rtol=1e-4, atol=1e-5):
        broken["output"] = _("with dropout the output is not the returned weights times value")
    return broken


PROBES = {"forward": forward, "untouched": untouched, "gradients": gradients, "dropout": dropout}
DROPOUT = {"relation": dropout_on_weights, "free": ("training_output", "training_weights")}

# ---------------------------------------------------------------- the public cases (16 points)
HALF = {"rtol": 1e-2, "atol": 4e-3}       # float16: a few units in the last place of the outputs
BFLOAT = {"rtol": 3e-2, "atol": 3e-2}     # bfloat16 keeps 8 bits of mantissa

# PyTorch's ready-made counterparts of this chapter's component (fnmatch patterns on the parts of a name).
READY_MADE = {"attention.py": ["scaled_dot_product_attention", "_scaled_dot_product_*", "flex_attention",
                               "MultiheadAttention", "multi_head_attention_forward", "Transformer*"]}

CASES = [
    Case("values, no mask", 1.0, "forward", lambda s: plain(s), seed=201,
         about="batch of 2, seq_q 5, seq_k 6, d_k 8, d_v 4"),
    Case("values with heads, no mask", 1.0, "forward", lambda s: plain(s, lead=(2, 3), seq_q=4, seq_k=4, d_k=16, d_v=16), seed=202,
         about="(batch, heads) leading dims"),
    Case("large d_k keeps softmax soft", 0.5, "forward", lambda s: plain(s, lead=(1,), seq_q=3, seq_k=7, d_k=64, d_v=8), seed=203,
         about="d_k 64, where a missing scale saturates the softmax"),
    Case("padding mask (batch, 1, 1, seq_k)", 1.5, "forward", lambda s: with_padding(s), seed=204,
         about="broadcast padding mask; True = may attend"),
    Case("causal mask (seq, seq)", 1.5, "forward", lambda s: with_causal(s), seed=205,
         about="a 2-D mask broadcast over batch and heads"),
    Case("fully masked row stays finite", 1.5, "forward", lambda s: with_empty_rows(s), seed=206,
         about="rows with no allowed key must not be NaN", ignore=fully_masked_rows),
    Case("float64 in, float64 out", 1.0, "forward", lambda s: plain(s, dtype=torch.float64), seed=207,
         about="the dtype of the inputs is kept", rtol=1e-7, atol=1e-9),
    Case("gradients reach query, key and value", 1.0, "gradients", lambda s: with_padding(s), seed=208,
         about="backward through the whole computation"),
    Case("inputs not modified in place", 1.0, "untouched", lambda s: with_padding(s), seed=209,
         about="query, key, value and mask unchanged after the call, whose output depends on the query",
         relation=depends_on_query, free=("output",),
         hint="Your function changed one of its inputs in place (an in-place op such as /=, masked_fill_ "
              "or softmax_ on an input): compute on new tensors.", hint_on=("query", "key", "value", "mask")),
    Case("key mask (seq_k,)", 0.5, "forward", lambda s: with_mask(s, "keys"), seed=210,
         about="a 1-D mask broadcast over batch, heads and queries"),
    Case("mask (batch, 1, seq_q, seq_k)", 0.5, "forward", lambda s: with_mask(s, "queries"), seed=211,
         about="one mask per sequence, shared by the heads"),
    Case("mask per head (batch, heads, seq_q, seq_k)", 0.5, "forward", lambda s: with_mask(s, "heads"), seed=212,
         about="a mask as large as the scores"),
    Case("float16 with a mask", 1.0, "forward", lambda s: with_padding(s, dtype=torch.float16), seed=213,
         about="half precision: the masked fill must fit in float16", **HALF),
    Case("bfloat16 with a mask", 1.0, "forward", lambda s: with_causal(s, dtype=torch.bfloat16), seed=214,
         about="bfloat16 in, bfloat16 out", **BFLOAT),
    Case("square shapes (batch = seq_k = d_k)", 0.5, "forward",
         lambda s: plain(s, lead=(4,), seq_q=3, seq_k=4, d_k=4, d_v=6), seed=215,
         about="batch, seq_k and d_k all 4, where transposing the wrong axes still runs"),
    Case("dropout on the weights, after the softmax", 1.0, "dropout", lambda s: with_dropout(s), seed=216,
         about="dropout_p = 0.25: a quarter of the weights zeroed, the others divided by 0.75, the output "
               "computed from them; dropout_p = 0 gives the reference's values", **DROPOUT),
    ready_made_case(READY_MADE, 1.0, about="no PyTorch ready-made attention (read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "no_scale": "The scores are not divided by √d_k: the softmax is too peaked. Scale Q Kᵀ by 1/math.sqrt(d_k).",
    "scale_by_d_k": "The scores are divided by d_k instead of √d_k.",
    "scale_by_d_v": "The scores are scaled with the width of value (d_v); the scale is √d_k, the width of query and key.",
    "softmax_wrong_axis": "Softmax over the wrong axis: each row of weights (one query over all keys) must sum to 1, so take the softmax over the last axis (dim=-1).",
    "inverted_mask": "The mask is inverted: True means *may attend*. Fill the scores where the mask is False (~mask).",
    "mask_ignored": "The mask is ignored: masked keys still receive weight.",
    "zero_fill": "Masked scores are set to 0, which still gives masked keys weight after the softmax; fill them with a very negative number such as torch.finfo(scores.dtype).min.",
    "neg_inf_fill": "Masked scores are filled with -inf, so a fully masked row becomes NaN (softmax of all -inf). Fill with torch.finfo(scores.dtype).min, which is finite.",
    "returns_scores": "The second value returned holds the scores before the softmax; return the attention weights (after the softmax).",
    "mask_after_softmax": "The mask is applied after the softmax: the weights of a row no longer sum to 1. Mask the scores, then take the softmax.",
    "inplace_scale": "The input query is modified in place (e.g. query /= math.sqrt(d_k) or query.div_()); compute on new tensors.",
    "mixes_keys": "The output mixes the keys, not the values: multiply the weights by value (the output's last axis is d_v, the width of value).",
    "big_negative_fill": "Masked scores are filled with a fixed big negative number such as -1e9, which does not fit in float16 (its most negative value is about -65504): fill with torch.finfo(scores.dtype).min, the most negative value of the scores' own dtype.",
    "mask_assumed_batch_seq_k": "The mask is assumed to be (batch, seq_k) (e.g. mask[:, None, None, :] on every mask): use it as given, broadcast against the scores (..., seq_q, seq_k). It may be (seq_k,), (seq_q, seq_k), (batch, 1, 1, seq_k), (batch, 1, seq_q, seq_k) or (batch, heads, seq_q, seq_k).",
    "swapped_return": "The results are returned as (weights, output); return (output, weights).",
    "dropout_missing": "dropout_p is ignored: with dropout_p > 0, drop each attention weight with probability "
                       "dropout_p and divide the others by 1 - dropout_p, e.g. torch.nn.functional.dropout(weights, "
                       "p=dropout_p), after the softmax and before multiplying by value.",
    "dropout_before_softmax": "Dropout is applied to the scores before the softmax: the softmax then turns the zeroed "
                              "scores into weights again. Drop the weights, after the softmax. (Dropping attention "
                              "weights is what torch.nn.MultiheadAttention and the Annotated Transformer do; the "
                              "paper's own dropout, section 5.4, acts on each sublayer's output and on the "
                              "embedding sums only.)",
    "dropout_not_rescaled": "The weights kept by dropout are not divided by 1 - dropout_p, so the expected output "
                            "shrinks in training and differs from evaluation: use torch.nn.functional.dropout, which "
                            "rescales, or divide the kept weights by 1 - dropout_p.",
    "dot_T": "key.T reverses *all* the axes of a batched tensor (and is deprecated for more than 2 dims), not just the last two: transpose the last two with key.transpose(-2, -1) (or key.mT).",
}

# Known mistakes recognised by the exception they raise (re.search on "raised <Type>: <message>"):
# they return no outputs to compare on the cases where they raise. key.T crashes in a shape mismatch that names
# nothing, but the description quotes the line of your file that raised it: a crash on a line with key.T.
RAISES = {
    "big_negative_fill": r"cannot be converted to type \S*(Half|BFloat16) without overflow",
    "dot_T": r"x\.T` on tensors of dimension other than|\(at attention\.py:\d+: .*\bkey\.T\b",
}
