"""Chapter 03 checks: split_heads, merge_heads and MultiHeadAttention(d_model, num_heads, dropout=0.0).

Each case builds your module with the reference's weights (saved with the inputs, so nothing depends on
your initialisation), in evaluation mode. Public cases use the seeds below; the grader adds hidden cases
with other seeds and shapes. Expected outputs come from the reference (tests/reference/ch03.pt).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "03"
TITLE = "Multi-head attention"
MODULES = ["multihead.py"]  # the learner's files this chapter grades
REQUIRES = ["02"]           # multihead.py calls chapter 02's scaled_dot_product_attention

_ch02 = load_spec("02")     # what dropout must do to attention weights (``dropped_weights``)

LAYERS = ("w_q", "w_k", "w_v", "w_o")


# ---------------------------------------------------------------- inputs (deterministic by seed)
def tensor(seed: int, batch: int = 2, seq: int = 5, d_model: int = 12, heads: int = 3, split: bool = False,
           dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """A tensor to split, (batch, seq, d_model), or, with ``split``, to merge, (batch, heads, seq, d_k)."""
    g = torch.Generator().manual_seed(seed)
    shape = (batch, heads, seq, d_model // heads) if split else (batch, seq, d_model)
    return {"x": torch.randn(*shape, generator=g, dtype=dtype), "num_heads": torch.tensor(heads)}


def attention_inputs(seed: int, batch: int = 2, seq_q: int = 5, seq_k: int | None = None, d_model: int = 12,
                     heads: int = 3, mask: str | None = None, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Query, key, value, the weights of the four projections and an optional mask.

    ``seq_k`` None is self-attention (query, key and value hold the same values); ``mask`` is None,
    "padding" ((batch, 1, 1, seq_k), a different length per sequence), "causal" ((seq_q, seq_k)), "target"
    (both: (batch, 1, seq_q, seq_k)) or "heads" (random, one per head: (batch, heads, seq_q, seq_k)).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq_q, d_model, generator=g, dtype=dtype)       # (batch, seq_q, d_model)
    if seq_k is None:
        inputs = {"query": x, "key": x.clone(), "value": x.clone()}
        seq_k = seq_q
    else:
        memory = torch.randn(batch, seq_k, d_model, generator=g, dtype=dtype)  # (batch, seq_k, d_model)
        inputs = {"query": x, "key": memory, "value": memory.clone()}
    for name in LAYERS:
        inputs[f"{name}.weight"] = torch.randn(d_model, d_model, generator=g, dtype=dtype) / d_model ** 0.5
        inputs[f"{name}.bias"] = 0.1 * torch.randn(d_model, generator=g, dtype=dtype)
    inputs["num_heads"] = torch.tensor(heads)
    if mask in ("padding", "target"):
        lengths = torch.arange(batch) % (seq_k - 1) + 2                      # (batch,) each >= 2 valid keys
        keep = torch.arange(seq_k)[None, :] < torch.roll(lengths, 1)[:, None]  # (batch, seq_k)
        inputs["mask"] = keep[:, None, None, :]                              # (batch, 1, 1, seq_k)
    if mask in ("causal", "target"):
        causal = torch.tril(torch.ones(seq_q, seq_k, dtype=torch.bool))      # (seq_q, seq_k)
        inputs["mask"] = inputs["mask"] & causal if mask == "target" else causal  # (batch, 1,) seq_q, seq_k
    if mask == "heads":
        per_head = torch.rand(batch, heads, seq_q, seq_k, generator=g) > 0.4  # (batch, heads, seq_q, seq_k)
        inputs["mask"] = per_head | (torch.arange(seq_k) == 0)               # every query keeps key 0
    return inputs


# ---------------------------------------------------------------- probes (they call your code)
def build(impl, inputs: dict[str, Tensor], dropout: float | None = None) -> nn.Module:
    """Your MultiHeadAttention with the case's weights, in evaluation mode, in the inputs' dtype; built with
    ``dropout`` when given, else with the default."""
    d_model, heads = inputs["query"].shape[-1], int(inputs["num_heads"])
    mha = impl.multihead.MultiHeadAttention
    module = mha(d_model, heads) if dropout is None else mha(d_model, heads, dropout=dropout)
    if not isinstance(module, nn.Module):
        raise CheckFailure("MultiHeadAttention must be an nn.Module (class MultiHeadAttention(nn.Module))")
    module = module.to(inputs["query"].dtype).eval()
    with torch.no_grad():
        for name in LAYERS:
            layer = getattr(module, name, None)
            if not isinstance(layer, nn.Linear) or layer.bias is None:
                raise CheckFailure("MultiHeadAttention needs a member {name} = nn.Linear(d_model, d_model) "
                                   "with a bias: the checks load their weights into it", name=name)
            layer.weight.copy_(inputs[f"{name}.weight"])
            layer.bias.copy_(inputs[f"{name}.bias"])
    return module


def _attend(module: nn.Module, inputs: dict[str, Tensor]) -> Tensor:
    args = (inputs["query"], inputs["key"], inputs["value"])
    return module(*args, mask=inputs["mask"]) if "mask" in inputs else module(*args)


def split(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": impl.multihead.split_heads(inputs["x"], int(inputs["num_heads"]))}


def merge(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": impl.multihead.merge_heads(inputs["x"])}


def roundtrip(impl, inputs: dict[str, Tensor]) -> Outputs:
    heads = impl.multihead.split_heads(inputs["x"], int(inputs["num_heads"]))
    return {"output": impl.multihead.merge_heads(heads)}


def forward(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": _attend(build(impl, inputs), inputs)}


def kept_weights(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The attention weights the module keeps after a call, for plots."""
    module = build(impl, inputs)
    _attend(module, inputs)
    weights = getattr(module, "attn_weights", None)
    if weights is None:
        raise CheckFailure("after a call, self.attn_weights must hold the attention weights "
                           "(batch, heads, seq_q, seq_k) of that call")
    return {"weights": weights}


def weights_detached(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Whether the weights kept after a call with autograd on still carry the graph (1.0) or not (0.0), and the
    weights themselves: a 0-d float64 tensor beside the (batch, heads, seq_q, seq_k) map."""
    module = build(impl, inputs)
    _attend(module, inputs)  # the parameters require grad: weights computed from them have a graph
    weights = getattr(module, "attn_weights", None)
    if not isinstance(weights, Tensor):
        raise CheckFailure("after a call, self.attn_weights must hold the attention weights "
                           "(batch, heads, seq_q, seq_k) of that call")
    graph = weights.requires_grad or weights.grad_fn is not None
    return {"weights": weights.detach(), "weights_have_a_graph": torch.tensor(float(graph), dtype=torch.float64)}


def gradients(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Backpropagate a fixed random weighting of the output to the inputs and to every parameter."""
    g = torch.Generator().manual_seed(7)
    module = build(impl, inputs)
    for name in ("query", "key", "value"):
        inputs[name].requires_grad_(True)
    output = _attend(module, inputs)
    if not isinstance(output, Tensor) or not output.requires_grad:
        raise CheckFailure("no gradient flows back from the output: did you detach, use .data, or go through numpy?")
    (output * torch.randn(output.shape, generator=g, dtype=output.dtype)).sum().backward()
    grads = {}
    for name in ("query", "key", "value"):
        grads[f"grad_{name}"] = inputs[name].grad
    for name in LAYERS:
        for part in ("weight", "bias"):
            grads[f"grad_{name}.{part}"] = getattr(getattr(module, name), part).grad
    missing = [k for k, v in grads.items() if v is None]
    if missing:
        raise CheckFailure("no gradient reached {names}: use every projection, in torch operations",
                           names=", ".join(missing))
    return grads


def dropout(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Built with the default dropout (0) and in training mode: the reference's output. Built with dropout p: in
    evaluation mode the reference's output (and weights), in training mode on a seeded generator judged by
    ``dropout_on_heads`` (which weights are dropped depends on how your chapter 02 code draws them)."""
    with torch.no_grad():
        default = _attend(build(impl, inputs).train(), inputs)
        module = build(impl, inputs, dropout=float(inputs["dropout"]))
        output = _attend(module, inputs)
        weights = module.attn_weights
        torch.manual_seed(3)
        training_output = _attend(module.train(), inputs)
        training_weights = module.attn_weights
    if not isinstance(weights, Tensor) or not isinstance(training_weights, Tensor):
        raise CheckFailure("after a call, self.attn_weights must hold the attention weights (batch, heads, seq_q, "
                           "seq_k) of that call")
    return {"output_default_dropout": default, "output": output, "weights": weights,
            "training_output": training_output, "training_weights": training_weights}


def dropout_on_heads(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """Checked with the comparison, never beside your code: the kept weights are the attention weights dropped
    (chapter 02's ``dropped_weights``), and the output is made from them: w_o(merge(weights @ split(w_v(value))))."""
    p, heads = float(inputs["dropout"]), int(inputs["num_heads"])
    dropped = outputs["training_weights"]
    broken = _ch02.dropped_weights(outputs["weights"], dropped, p)
    if "shape" in broken or outputs["training_output"].shape != outputs["output"].shape:
        return broken
    v = inputs["value"] @ inputs["w_v.weight"].T + inputs["w_v.bias"]                  # (batch, seq_k, d_model)
    batch, seq_k, d_model = v.shape
    v = v.view(batch, seq_k, heads, d_model // heads).transpose(1, 2)                  # (batch, heads, seq_k, d_k)
    mixed = (dropped @ v).transpose(1, 2).reshape(batch, -1, d_model)                  # (batch, seq_q, d_model)
    if not torch.allclose(outputs["training_output"], mixed @ inputs["w_o.weight"].T + inputs["w_o.bias"],
                          rtol=1e-4, atol=1e-5):
        broken["output"] = _("in training mode the output is not made from the attention weights kept (attn_weights)")
    return broken


def indivisible(impl, inputs: dict[str, Tensor]) -> Outputs:
    """MultiHeadAttention(d_model, bad_heads) with d_model not divisible must raise a ValueError (what was
    raised is read, not compared); the case's own heads must work, so that a module that always raises fails."""
    raised: BaseException | None = None
    try:
        impl.multihead.MultiHeadAttention(inputs["query"].shape[-1], int(inputs["bad_heads"]))
    except Exception as exc:  # noqa: BLE001 - which exception it is, is what is checked
        raised = exc
    return {"raises_ValueError": torch.tensor(isinstance(raised, ValueError)),
            "output": _attend(build(impl, inputs), inputs)}


PROBES = {"split": split, "merge": merge, "roundtrip": roundtrip, "forward": forward, "weights": kept_weights,
          "detached": weights_detached,
          "gradients": gradients, "dropout": dropout, "indivisible": indivisible}
DROPOUT = {"relation": dropout_on_heads, "free": ("training_output", "training_weights")}


def with_dropout(seed: int, p: float = 0.3, **sizes: int) -> dict[str, Tensor]:
    """``attention_inputs`` without a mask (every weight > 0) and the dropout probability."""
    return {**attention_inputs(seed, **sizes), "dropout": torch.tensor(p, dtype=torch.float64)}

# ---------------------------------------------------------------- the public cases (12 points)
# PyTorch's ready-made counterparts of this chapter's component (fnmatch patterns on the parts of a name);
# your own chapter 02 function (from .attention import ...) is not one of them.
READY_MADE = {"multihead.py": ["MultiheadAttention", "multi_head_attention_forward", "scaled_dot_product_attention",
                               "_scaled_dot_product_*", "flex_attention", "Transformer*"]}

MASK_HINT = ("The mask arrives ready to broadcast over the heads, (batch, 1, 1, seq_k) or (seq_q, seq_k): pass "
             "it to your chapter 02 attention as it is, with query, key and value split to (batch, heads, seq, "
             "d_k); adding an axis to it (mask[:, None], unsqueeze(1)) breaks the broadcast.")

CASES = [
    Case("split_heads: shape and values", 1.0, "split", lambda s: tensor(s), seed=301,
         about="(2, 5, 12) with 3 heads -> (2, 3, 5, 4)"),
    Case("merge_heads: shape and values", 1.0, "merge", lambda s: tensor(s, split=True), seed=302,
         about="(2, 3, 5, 4) -> (2, 5, 12)"),
    Case("merge_heads(split_heads(x)) is x", 0.5, "roundtrip", lambda s: tensor(s, batch=3, seq=4, d_model=16, heads=4),
         seed=303, about="the two are inverses"),
    Case("self-attention values", 1.5, "forward", lambda s: attention_inputs(s), seed=304,
         about="batch 2, seq 5, d_model 12, 3 heads; no mask"),
    Case("cross-attention (seq_q != seq_k)", 1.0, "forward", lambda s: attention_inputs(s, seq_q=4, seq_k=7), seed=305,
         about="queries from one sequence, keys and values from another"),
    Case("padding mask (batch, 1, 1, seq_k)", 1.5, "forward",
         lambda s: attention_inputs(s, batch=3, seq_q=6, heads=3, mask="padding"), seed=306,
         about="one padding mask per sequence, broadcast over heads and queries", hint_if_raises=MASK_HINT),
    Case("causal mask (seq, seq)", 1.0, "forward", lambda s: attention_inputs(s, seq_q=6, heads=2, d_model=8,
                                                                              mask="causal"), seed=307,
         about="a 2-D mask broadcast over batch and heads", hint_if_raises=MASK_HINT),
    Case("attention weights kept", 0.5, "weights", lambda s: attention_inputs(s, seq_q=3, seq_k=5, mask="padding"),
         seed=308, about="self.attn_weights is (batch, heads, seq_q, seq_k) after a call",
         hint="self.attn_weights must hold the weights returned by your attention, one map per head."),
    Case("attention weights kept without their graph", 0.5, "detached",
         lambda s: attention_inputs(s, seq_q=4, seq_k=6, mask="causal"), seed=313,
         about="after a call with autograd on, self.attn_weights holds the weights detached: "
               "weights_have_a_graph is 0 (no requires_grad, no grad_fn)"),
    Case("gradients reach inputs and parameters", 1.0, "gradients", lambda s: attention_inputs(s, mask="causal"),
         seed=309, about="backward to query, key, value and every weight and bias"),
    Case("float64 in, float64 out", 0.5, "forward", lambda s: attention_inputs(s, dtype=torch.float64), seed=310,
         about="the dtype of the inputs is kept", rtol=1e-7, atol=1e-9),
    Case("dropout on the attention weights, training mode only", 1.0, "dropout",
         lambda s: with_dropout(s, batch=4, seq_q=12, d_model=16, heads=4), seed=311, **DROPOUT,
         about="dropout 0.3 reaches your chapter 02 attention in training mode only (the weights kept divided by "
               "0.7, the output made from them); in evaluation mode, and with the default dropout 0, the "
               "reference's output"),
    Case("d_model not divisible by num_heads", 0.5, "indivisible",
         lambda s: {**attention_inputs(s, d_model=12, heads=3), "bad_heads": torch.tensor(5)}, seed=312,
         about="MultiHeadAttention(12, 5) raises a ValueError; (12, 3) works",
         hint="Raise ValueError in __init__ when d_model % num_heads != 0: each head gets d_k = d_model / "
              "num_heads features.", hint_on=("raises_ValueError",)),
    ready_made_case(READY_MADE, 0.5, about="no PyTorch ready-made attention (read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "reshape_no_transpose": "split_heads reshapes (batch, seq, d_model) straight to (batch, heads, seq, d_k) without a "
                            "transpose, which mixes positions across heads: view it as (batch, seq, heads, d_k), then "
                            "transpose(1, 2).",
    "interleaved_heads": "The heads take interleaved features (head i gets features i, i + h, i + 2h, ...): head i "
                         "holds the contiguous slice i*d_k ... (i+1)*d_k - 1. View the last axis as (heads, d_k), "
                         "x.view(batch, seq, heads, d_k), not (d_k, heads).",
    "merge_no_transpose": "merge_heads reshapes (batch, heads, seq, d_k) straight to (batch, seq, d_model): transpose "
                          "back to (batch, seq, heads, d_k) first (transpose(1, 2)), then reshape.",
    "scale_by_d_model": "The scores are scaled by √d_model instead of √d_k, the width of one head: call your chapter "
                        "02 attention on the split heads, whose last axis is d_k.",
    "no_output_projection": "The output projection is missing: after merging the heads, apply self.w_o.",
    "mask_not_over_heads": "The heads axis comes first, (heads, batch, seq, d_k), so a padding mask (batch, 1, 1, "
                           "seq_k) lines up with the heads instead of the sequences: the mask is not broadcast over "
                           "the heads. Keep the layout (batch, heads, seq, d_k).",
    "dropout_in_evaluation": "Attention dropout is on in evaluation mode too: pass dropout_p=self.dropout when "
                             "self.training, and 0.0 otherwise (model.eval() must make the output deterministic).",
    "dropout_not_passed": "The module's dropout never reaches the attention: call scaled_dot_product_attention(..., "
                          "dropout_p=self.dropout if self.training else 0.0).",
    "weights_not_detached": "self.attn_weights keeps the weights with their autograd graph (requires_grad, a grad_fn): "
                            "it is kept for plots only, so store a detached copy (.detach()), which holds no memory "
                            "of the backward pass and cannot be backpropagated through by accident.",
    "shared_projection": "Query, key and value go through the same projection: use self.w_q for the query, self.w_k "
                         "for the key and self.w_v for the value.",
}
