"""Chapter 05 checks: LayerNorm, PositionwiseFeedForward, EncoderLayer (Post-LN and Pre-LN) and Encoder.

Each case builds your module with the reference's weights (saved with the inputs, so nothing depends on
your initialisation), in evaluation mode, and loads them by parameter name (``self_attn.w_q.weight``,
``ffn.linear1.bias``, ``norm2.weight``, ``layers.1.norm1.bias``, ``norm.weight`` ...): the names are part
of the contract. Public cases use the seeds below; the grader adds hidden cases with other seeds and
shapes. Expected outputs come from the reference (tests/reference/ch05.pt).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from course_lib.provided.chapters import load_spec_part
from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "05"
TITLE = "Encoder"
MODULES = ["encoder.py"]  # the learner's files this chapter grades
REQUIRES = ["03"]         # the encoder layer's self-attention is chapter 03's MultiHeadAttention (on 02's attention)

# ---------------------------------------------------------------- inputs (deterministic by seed): ch05_inputs.py
_inputs = load_spec_part("05", "inputs")
P = _inputs.P  # prefix of the inputs that are parameters, e.g. "p:self_attn.w_q.weight"
norm_inputs, ffn_inputs, layer_inputs = _inputs.norm_inputs, _inputs.ffn_inputs, _inputs.layer_inputs
_linear, _norm = _inputs._linear, _inputs._norm  # chapter 08's weights are made by these too


# ---------------------------------------------------------------- probes (they call your code)
def _load(module: object, what: str, inputs: dict[str, Tensor]) -> nn.Module:
    """``module`` in the inputs' dtype, in evaluation mode, holding the case's parameters (by name)."""
    if not isinstance(module, nn.Module):
        raise CheckFailure("{what} must be an nn.Module (class {what}(nn.Module))", what=what)
    module = module.to(inputs["x"].dtype).eval()
    params = dict(module.named_parameters())
    with torch.no_grad():
        for key, value in inputs.items():
            if not key.startswith(P):
                continue
            name = key[len(P):]
            if name not in params:
                near = [p for p in params if p.rsplit(".", 1)[0] == name.rsplit(".", 1)[0]] or list(params)[:4]
                raise CheckFailure("{what} has no parameter {name}: the checks load their weights by these names, so "
                                   "keep the members of the docstring (it has {count} parameters{near})", what=what,
                                   name=name, count=len(params), near=_(", e.g. {names}").format(names=", ".join(near[:4])) if near else "")
            if params[name].shape != value.shape:
                raise CheckFailure("{what}: parameter {name} has shape {got}, expected {want}", what=what, name=name,
                                   got=tuple(params[name].shape), want=tuple(value.shape))
            params[name].copy_(value)
    return module


def _build_layer(impl, inputs: dict[str, Tensor]) -> nn.Module:
    d_model = inputs["x"].shape[-1]
    args = (d_model, int(inputs["num_heads"]), int(inputs["d_ff"]))
    first, p = bool(inputs["norm_first"]), float(inputs.get("dropout", 0.1))
    if "num_layers" in inputs:
        return _load(impl.encoder.Encoder(int(inputs["num_layers"]), *args, dropout=p, norm_first=first),
                     "Encoder", inputs)
    return _load(impl.encoder.EncoderLayer(*args, dropout=p, norm_first=first), "EncoderLayer", inputs)


def _run(module: nn.Module, inputs: dict[str, Tensor]) -> Tensor:
    return module(inputs["x"], mask=inputs["mask"]) if "mask" in inputs else module(inputs["x"])


def norm(impl, inputs: dict[str, Tensor]) -> Outputs:
    module = impl.encoder.LayerNorm(inputs["x"].shape[-1], eps=float(inputs["eps"]))
    return {"output": _load(module, "LayerNorm", inputs)(inputs["x"])}


def norm_init(impl, inputs: dict[str, Tensor]) -> Outputs:
    """A fresh LayerNorm's parameters: weight ones and bias zeros, both nn.Parameter."""
    module = impl.encoder.LayerNorm(inputs["x"].shape[-1])
    out = {}
    for name in ("weight", "bias"):
        value = getattr(module, name, None)
        if not isinstance(value, nn.Parameter):
            raise CheckFailure("LayerNorm.{name} must be an nn.Parameter of shape (d_model,), so that it is learned "
                               "(and found by module.parameters())", name=name)
        out[name] = value.detach()
    return out


def _build_ffn(impl, inputs: dict[str, Tensor]) -> nn.Module:
    module = impl.encoder.PositionwiseFeedForward(inputs["x"].shape[-1], int(inputs["d_ff"]),
                                                  dropout=float(inputs.get("dropout", 0.1)))
    return _load(module, "PositionwiseFeedForward", inputs)


def ffn(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": _build_ffn(impl, inputs)(inputs["x"])}


def silence_attention(module: nn.Module) -> Tensor:
    """The dropout of every attention in ``module`` (members ending in ``_attn``, in order), then set to 0 there:
    attention dropout is chapter 03's (judged there); without it, the only draws left are the layer's own
    nn.Dropout calls, whose order the formulas fix, so that a seeded training pass can be compared with the
    reference's. (0-d tensors of the rates; NaN where an attention keeps no ``dropout``.)"""
    rates = []
    for name, sub in module.named_modules():
        if name.endswith("_attn"):
            rates.append(float(getattr(sub, "dropout", float("nan"))))
            sub.dropout = 0.0
    return torch.tensor(rates, dtype=torch.float64)


def seeded_training(module: nn.Module, run: Callable[[nn.Module], Tensor]) -> Outputs:
    """``run(module)`` in evaluation mode, then the attentions' dropout read and silenced (``silence_attention``)
    and ``run(module)`` in training mode on a seeded generator: compared with the reference's (chapter 06 too)."""
    with torch.no_grad():
        output = run(module)
        rates = silence_attention(module)
        torch.manual_seed(5)
        training_output = run(module.train())
    return {"output": output, "attention_dropout": rates, "training_output": training_output}


def training(impl, inputs: dict[str, Tensor]) -> Outputs:
    """A layer, an encoder or an FFN built with the case's dropout, run by ``seeded_training``."""
    module = _build_layer(impl, inputs) if "num_heads" in inputs else _build_ffn(impl, inputs)
    return seeded_training(module, lambda m: _run(m, inputs))


def settings(modules: dict[str, nn.Module]) -> Outputs:
    """Every dropout probability (nn.Dropout's p, an attention's dropout), norm_first and whether a final norm
    exists, of modules built with their defaults ({label: module}); chapter 06 uses it too."""
    out = {}
    for what, module in modules.items():
        for name, sub in module.named_modules():
            if isinstance(sub, nn.Dropout):
                out[f"{what}: {name}.p"] = torch.tensor(sub.p, dtype=torch.float64)
            if name.endswith("_attn"):
                out[f"{what}: {name}.dropout"] = torch.tensor(float(getattr(sub, "dropout", float("nan"))),
                                                              dtype=torch.float64)
            if hasattr(sub, "norm_first"):
                out[f"{what}: {name}.norm_first"] = torch.tensor(bool(sub.norm_first))
        out[f"{what}: has a final norm"] = torch.tensor(getattr(module, "norm", None) is not None)
    return out


def defaults(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The modules built with their defaults: every dropout probability (0.1) and norm_first (False)."""
    d_model, heads, d_ff = inputs["x"].shape[-1], int(inputs["num_heads"]), int(inputs["d_ff"])
    enc = impl.encoder
    return settings({"ffn": enc.PositionwiseFeedForward(d_model, d_ff), "layer": enc.EncoderLayer(d_model, heads, d_ff),
                     "encoder": enc.Encoder(1, d_model, heads, d_ff)})


def forward(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": _run(_build_layer(impl, inputs), inputs)}


def gradients(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Backpropagate a fixed random weighting of the output to the input and to every parameter."""
    g = torch.Generator().manual_seed(7)
    module = _build_layer(impl, inputs)
    inputs["x"].requires_grad_(True)
    output = _run(module, inputs)
    if not isinstance(output, Tensor) or not output.requires_grad:
        raise CheckFailure("no gradient flows back from the output: did you detach, use .data, or go through numpy?")
    (output * torch.randn(output.shape, generator=g, dtype=output.dtype)).sum().backward()
    params = dict(module.named_parameters())
    grads = {"grad_x": inputs["x"].grad}
    grads.update({f"grad_{k[len(P):]}": params[k[len(P):]].grad for k in inputs if k.startswith(P)})
    missing = [k for k, v in grads.items() if v is None]
    if missing:
        raise CheckFailure("no gradient reached {names}: use every parameter, in torch operations",
                           names=", ".join(missing))
    return grads


PROBES = {"norm": norm, "norm_init": norm_init, "ffn": ffn, "forward": forward, "gradients": gradients,
          "training": training, "defaults": defaults}

# ---------------------------------------------------------------- the public cases (15 points)
# PyTorch's ready-made counterparts of this chapter's components (fnmatch patterns on the parts of a name);
# your own chapter 03 MultiHeadAttention (from .multihead import ...) is not one of them.
READY_MADE = {"encoder.py": ["LayerNorm", "layer_norm", "native_layer_norm", "Transformer*", "MultiheadAttention",
                             "multi_head_attention_forward", "scaled_dot_product_attention", "_scaled_dot_product_*"]}

CASES = [
    Case("LayerNorm starts as weight 1, bias 0", 0.5, "norm_init", lambda s: norm_inputs(s, shape=(3, 10)),
         seed=501, about="weight = ones(d_model), bias = zeros(d_model), both nn.Parameter"),
    Case("LayerNorm values (batch, seq, d_model)", 1.0, "norm", lambda s: norm_inputs(s), seed=502,
         about="normalise each position over its 16 features, then scale by weight and shift by bias"),
    Case("LayerNorm on (tokens, d_model), far from 0", 0.5, "norm",
         lambda s: norm_inputs(s, shape=(7, 6), shift=40.0, scale=3.0), seed=503,
         about="a 2-D input with mean 40: the mean is taken per row, over the last axis"),
    Case("LayerNorm eps inside the square root", 0.5, "norm",
         lambda s: norm_inputs(s, shape=(2, 4, 8), eps=0.1, scale=0.2), seed=504,
         about="eps = 0.1 on rows whose variance is about 0.04: (x - mean) / sqrt(var + eps)"),
    Case("feed-forward values", 1.0, "ffn", lambda s: ffn_inputs(s), seed=505,
         about="linear1, ReLU, linear2 at every position; d_model 12, d_ff 24"),
    Case("encoder layer, Post-LN", 1.5, "forward", lambda s: layer_inputs(s), seed=506,
         about="norm_first=False, no mask: x = norm1(x + attn(x)); x = norm2(x + ffn(x))"),
    Case("encoder layer, Post-LN, padding mask", 1.0, "forward",
         lambda s: layer_inputs(s, batch=3, seq=6, mask=True), seed=507,
         about="a padding mask (batch, 1, 1, seq), True = may attend, passed to the self-attention"),
    Case("encoder layer, Pre-LN", 1.0, "forward", lambda s: layer_inputs(s, norm_first=True), seed=508,
         about="norm_first=True, no mask: x = x + attn(norm1(x)); x = x + ffn(norm2(x))"),
    Case("encoder layer, Pre-LN, padding mask", 1.0, "forward",
         lambda s: layer_inputs(s, batch=3, seq=6, d_model=16, heads=4, norm_first=True, mask=True), seed=509,
         about="Pre-LN with a padding mask (batch, 1, 1, seq)"),
    Case("encoder of 3 layers, Post-LN, padding mask", 1.0, "forward",
         lambda s: layer_inputs(s, batch=3, seq=5, layers=3, mask=True), seed=510,
         about="Encoder: the layers in order, the mask given to each; no final norm (norm is None)"),
    Case("encoder of 2 layers, Pre-LN, final norm", 1.0, "forward",
         lambda s: layer_inputs(s, batch=2, seq=6, layers=2, norm_first=True, mask=True), seed=511,
         about="Encoder with norm_first=True ends with its own LayerNorm, self.norm"),
    Case("gradients reach the input and every parameter", 1.0, "gradients",
         lambda s: layer_inputs(s, batch=2, seq=4, mask=True), seed=512,
         about="backward through a Post-LN layer with a padding mask"),
    Case("float64 in, float64 out", 0.5, "forward",
         lambda s: layer_inputs(s, norm_first=True, mask=True, dtype=torch.float64), seed=513,
         about="the dtype of the inputs is kept", rtol=1e-7, atol=1e-9),
    Case("feed-forward dropout after the ReLU, training mode only", 0.5, "training",
         lambda s: {**ffn_inputs(s, batch=3, seq=6, d_ff=48), "dropout": torch.tensor(0.4)}, seed=514,
         about="dropout 0.4 on the hidden units, between the ReLU and linear2, in training mode (seeded: the "
               "reference's values); none in evaluation mode"),
    Case("encoder layer dropout, Post-LN, training mode only", 1.0, "training",
         lambda s: {**layer_inputs(s, batch=3, seq=6, mask=True), "dropout": torch.tensor(0.3)}, seed=515,
         about="dropout 0.3 on each sublayer's output before its residual sum and inside the FFN, and given to "
               "the self-attention (its own dropout is chapter 03's: set to 0 here, then a seeded training pass "
               "is compared with the reference's); none in evaluation mode"),
    Case("encoder layer dropout, Pre-LN, training mode only", 1.0, "training",
         lambda s: {**layer_inputs(s, batch=3, seq=6, norm_first=True, mask=True), "dropout": torch.tensor(0.3)},
         seed=517, about="norm_first=True: dropout 0.3 on each sublayer's output before its residual sum and inside "
                         "the FFN, as in Post-LN (seeded, the attention's own set to 0); none in evaluation mode"),
    Case("defaults: dropout 0.1, Post-LN", 0.5, "defaults", lambda s: layer_inputs(s), seed=516,
         about="PositionwiseFeedForward, EncoderLayer and Encoder built with their defaults"),
    ready_made_case(READY_MADE, 0.5, about="no PyTorch ready-made layer norm, encoder layer or attention "
                                           "(read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "pre_ln_for_post_ln": "With norm_first=False the layer computes Pre-LN, x + sublayer(norm(x)): the paper's layer "
                          "(Post-LN) normalises after the residual sum, x = norm1(x + attn(x)), then "
                          "x = norm2(x + ffn(x)). Branch on self.norm_first.",
    "post_ln_for_pre_ln": "With norm_first=True the layer computes Post-LN, norm(x + sublayer(x)): Pre-LN normalises "
                          "the sublayer's input only, x = x + attn(norm1(x)), then x = x + ffn(norm2(x)), and "
                          "leaves the residual sum unnormalised. Branch on self.norm_first.",
    "norm_wrong_axis": "LayerNorm takes its mean and variance over the wrong axis (the positions, dim=-2): take "
                       "them over the last axis, the features of one position (dim=-1, keepdim=True).",
    "unbiased_variance": "LayerNorm uses the unbiased variance (dividing by d_model - 1, the default of x.var() and "
                         "x.std()): layer norm divides by d_model, as torch.nn.LayerNorm does; use "
                         "((x - mean) ** 2).mean(-1, keepdim=True) or x.var(-1, unbiased=False, keepdim=True).",
    "post_ln_norm_before_residual": "Post-LN with the norm on the sublayer's output before the residual, "
                                    "x = x + norm1(attn(x)): the paper normalises the sum, "
                                    "x = norm1(x + attn(x)) (and x = norm2(x + ffn(x))).",
    "pre_ln_residual_from_normed": "Pre-LN whose residual starts from the normalised input, h = norm1(x); "
                                   "x = h + attn(h): the residual must carry the un-normalised x, "
                                   "x = x + attn(norm1(x)) (and x = x + ffn(norm2(x))).",
    "eps_outside_sqrt": "eps is added outside the square root, (x - mean) / (sqrt(var) + eps): it goes inside, "
                        "(x - mean) / sqrt(var + eps), as torch.nn.LayerNorm computes it.",
    "ffn_no_relu": "The feed-forward network has no ReLU between its two linear layers, so it is one linear map: "
                   "compute linear2(dropout(relu(linear1(x)))).",
    "mask_not_passed": "The padding mask does not reach the self-attention, so real tokens attend to padding: "
                       "call self.self_attn(x, x, x, mask=mask) (and in Encoder, give the mask to every layer).",
    "sublayer_dropout_missing": "The sublayers' outputs are not dropped in training mode: apply self.dropout to "
                                "each sublayer's output before its residual sum, x + self.dropout(sublayer(...)).",
    "ffn_sublayer_dropout_missing": "The feed-forward sublayer's output is not dropped (the attention's is): "
                                    "x + self.dropout(self.ffn(...)), as for the attention.",
    "dropout_after_residual": "Dropout is applied to the residual sum, dropout(x + sublayer(x)), so it drops the "
                              "input x too: drop the sublayer's output only, x + dropout(sublayer(x)).",
    "ffn_dropout_after_output": "The feed-forward network drops its output instead of its hidden units: the "
                                "dropout goes between the ReLU and linear2, linear2(dropout(relu(linear1(x)))).",
    "attention_dropout_not_given": "The self-attention is built without the layer's dropout: "
                                   "MultiHeadAttention(d_model, num_heads, dropout), so that attention weights are "
                                   "dropped in training too.",
    "pre_ln_sublayer_dropout_missing": "With norm_first=True the sublayers' outputs are not dropped in training mode "
                                       "(the Post-LN branch drops them): Pre-LN drops each sublayer's output before "
                                       "its residual sum too, x + self.dropout(attn(norm1(x))), then "
                                       "x + self.dropout(ffn(norm2(x))).",
    "pre_ln_ffn_sublayer_dropout_missing": "With norm_first=True the feed-forward sublayer's output is not dropped "
                                           "(the attention's is): in Pre-LN too it is x + self.dropout(ffn(norm2(x))).",
    "ffn_gelu": "The feed-forward network uses GELU (as BERT and GPT do): the paper's position-wise network, and "
                "the contract's, has a ReLU between linear1 and linear2, max(0, x W1 + b1) W2 + b2.",
    "eps_ignored": "LayerNorm ignores the eps it is built with (a fixed 1e-5, or none): keep the eps argument, "
                   "self.eps = eps, and add that eps to the variance under the square root.",
    "pre_ln_no_final_norm": "The Pre-LN encoder does not apply its final norm: after the last layer, return "
                            "self.norm(x) when norm_first=True (Post-LN layers already end with a norm).",
}
