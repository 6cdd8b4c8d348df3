"""Chapter 08 checks: masked_mean(x, mask) and TransformerClassifier(vocab_size, d_model, num_heads, d_ff,
num_layers, num_classes=2, dropout=0.1, max_len=512, pad_id=0, norm_first=False).

Each classifier case builds your model with the reference's weights (saved with the inputs, so nothing
depends on your initialisation), in evaluation mode, and loads them by parameter name
(``embed.embedding.weight``, ``encoder.layers.0.self_attn.w_q.weight``, ``head.bias`` ...): the names are
part of the contract. The batches are padded with ``pad_id``; the padding probes add more pad columns,
and the checks require the reference's values and that nothing a real token sees changes (the probes
only return tensors: ``real_positions_unchanged`` and ``logits_unchanged`` run with the comparison, never
beside your code). Public cases use the seeds below; the grader adds hidden cases with other seeds and
shapes. Expected outputs come from the reference (tests/reference/ch08.pt).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "08"
TITLE = "Capstone: sentiment classifier"
MODULES = ["classifier.py"]  # the learner's files this chapter grades
REQUIRES = ["04", "05"]      # TokenEmbedding and PositionalEncoding (04), Encoder (05, on 03 and 02)

_encoder = load_spec("05")  # chapter 05's checks: its weight makers and the loader by parameter name
P = _encoder.P              # prefix of the inputs that are parameters, e.g. "p:head.weight"
_linear, _norm = _encoder._linear, _encoder._norm


# ---------------------------------------------------------------- inputs (deterministic by seed)
def _keep(batch: int, seq: int, empty_row: bool = False) -> Tensor:
    """(batch, seq) bool, True = a real token: row 0 full, the others shorter (>= 1 token), and with
    ``empty_row`` the last row all padding."""
    lengths = seq - (torch.arange(batch) * 3) % seq                     # (batch,) seq, seq - 3, ...
    keep = torch.arange(seq)[None, :] < lengths[:, None]                # (batch, seq)
    if empty_row:
        keep[-1] = False
    return keep


def pool_inputs(seed: int, batch: int = 3, seq: int = 6, d_model: int = 8, empty_row: bool = False,
                dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """x (batch, seq, d_model) and a mask (batch, seq), True = a real token. Padded positions of x hold
    large values, as an encoder's output may: averaging them in shows."""
    g = torch.Generator().manual_seed(seed)
    mask = _keep(batch, seq, empty_row)
    x = torch.randn(batch, seq, d_model, generator=g, dtype=dtype)     # (batch, seq, d_model)
    x = x.masked_fill(~mask[..., None], 0.0) + 10.0 * (~mask[..., None]).to(dtype)  # padding holds 10
    return {"x": x, "mask": mask}


def model_inputs(seed: int, batch: int = 3, seq: int = 7, vocab_size: int = 13, d_model: int = 16, heads: int = 4,
                 d_ff: int = 32, layers: int = 2, classes: int = 2, norm_first: bool = False, pad_id: int = 0,
                 padded: bool = True, empty_row: bool = False, extra: int = 0,
                 dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Tokens (batch, seq) padded with ``pad_id`` (none when ``padded`` is False) and the weights of a
    TransformerClassifier by parameter name; ``extra`` pad columns for the padding probes."""
    g = torch.Generator().manual_seed(seed)
    real = [i for i in range(vocab_size) if i != pad_id]
    tokens = torch.tensor(real)[torch.randint(0, len(real), (batch, seq), generator=g)]  # (batch, seq)
    if padded:
        tokens = tokens.masked_fill(~_keep(batch, seq, empty_row), pad_id)
    inputs = {"tokens": tokens, "pad_id": torch.tensor(pad_id), "num_heads": torch.tensor(heads),
              "d_ff": torch.tensor(d_ff), "num_layers": torch.tensor(layers), "norm_first": torch.tensor(norm_first),
              "extra": torch.tensor(extra),
              f"{P}embed.embedding.weight": torch.randn(vocab_size, d_model, generator=g, dtype=dtype) / d_model ** 0.5}
    for i in range(layers):
        for name in ("w_q", "w_k", "w_v", "w_o"):
            inputs.update(_linear(g, f"encoder.layers.{i}.self_attn.{name}", d_model, d_model, dtype))
        inputs.update(_linear(g, f"encoder.layers.{i}.ffn.linear1", d_model, d_ff, dtype))
        inputs.update(_linear(g, f"encoder.layers.{i}.ffn.linear2", d_ff, d_model, dtype))
        inputs.update(_norm(g, f"encoder.layers.{i}.norm1", d_model, dtype))
        inputs.update(_norm(g, f"encoder.layers.{i}.norm2", d_model, dtype))
    if norm_first:
        inputs.update(_norm(g, "encoder.norm", d_model, dtype))
    inputs.update(_linear(g, "head", d_model, classes, dtype))
    return inputs


# ---------------------------------------------------------------- probes (they call your code)
def pool(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"pooled": impl.classifier.masked_mean(inputs["x"], inputs["mask"])}


def build(impl, inputs: dict[str, Tensor]) -> nn.Module:
    """Your TransformerClassifier holding the case's weights, in the dtype of the weights, in eval mode."""
    vocab_size, d_model = inputs[f"{P}embed.embedding.weight"].shape
    classes = inputs[f"{P}head.bias"].shape[0]
    model = impl.classifier.TransformerClassifier(
        vocab_size=vocab_size, d_model=d_model, num_heads=int(inputs["num_heads"]), d_ff=int(inputs["d_ff"]),
        num_layers=int(inputs["num_layers"]), num_classes=classes, dropout=0.1, max_len=64,
        pad_id=int(inputs["pad_id"]), norm_first=bool(inputs["norm_first"]))
    if not isinstance(model, nn.Module):
        raise CheckFailure("TransformerClassifier must be an nn.Module (class TransformerClassifier(nn.Module))")
    if isinstance(getattr(model, "embed", None), nn.Embedding):
        raise CheckFailure("embed is a plain nn.Embedding, which does not multiply by √d_model: use chapter 04's "
                           "TokenEmbedding (from .positional import TokenEmbedding)")
    # chapter 05's loader takes the dtype of inputs["x"]: here, that of the weights
    return _encoder._load(model, "TransformerClassifier", {**inputs, "x": inputs[f"{P}head.weight"]})


def _more_padding(inputs: dict[str, Tensor]) -> Tensor:
    """The case's tokens with ``extra`` more pad columns on the right: (batch, seq + extra)."""
    tokens = inputs["tokens"]
    pad = torch.full((tokens.size(0), int(inputs["extra"])), int(inputs["pad_id"]), dtype=tokens.dtype)
    return torch.cat([tokens, pad], dim=1)


def logits(impl, inputs: dict[str, Tensor]) -> Outputs:
    """forward(tokens), or forward(tokens, mask) when the case gives an explicit mask (batch, seq)."""
    model = build(impl, inputs)
    return {"logits": model(inputs["tokens"], mask=inputs["mask"]) if "mask" in inputs else model(inputs["tokens"])}


def encoded(impl, inputs: dict[str, Tensor]) -> Outputs:
    """encode(tokens) of an unpadded batch: judged by ``ends_with_a_norm`` as well as compared."""
    with torch.no_grad():
        return {"hidden": build(impl, inputs).encode(inputs["tokens"])}


def defaults(impl, inputs: dict[str, Tensor]) -> Outputs:
    """TransformerClassifier(vocab_size, d_model, num_heads, d_ff, num_layers) with the other defaults: two classes,
    dropout 0.1 everywhere (chapter 05's ``settings``), max_len 512, pad_id 0, Post-LN."""
    model = impl.classifier.TransformerClassifier(13, 16, 4, 32, 1)
    head, positional = getattr(model, "head", None), getattr(model, "positional", None)
    return {**_encoder.settings({"classifier": model}),
            "num_classes": torch.tensor(getattr(head, "out_features", -1)),
            "pe_shape": torch.tensor(tuple(getattr(getattr(positional, "pe", None), "shape", ()))),
            "pad_id": torch.tensor(float(getattr(model, "pad_id", float("nan"))), dtype=torch.float64)}


def attention_ignores_padding(impl, inputs: dict[str, Tensor]) -> Outputs:
    """encode() on the batch and on the batch with more pad columns (cut back to the batch's length)."""
    model = build(impl, inputs)
    tokens = inputs["tokens"]
    with torch.no_grad():
        hidden = model.encode(tokens)                                                  # (batch, seq, d_model)
        hidden_more_padding = model.encode(_more_padding(inputs))[:, :tokens.size(1)]  # (batch, seq, d_model)
    return {"hidden": hidden, "hidden_more_padding": hidden_more_padding}


def padding_invariance(impl, inputs: dict[str, Tensor]) -> Outputs:
    """forward() on the batch and on the batch with more pad columns."""
    model = build(impl, inputs)
    with torch.no_grad():
        logits = model(inputs["tokens"])                            # (batch, num_classes)
        logits_more_padding = model(_more_padding(inputs))          # (batch, num_classes)
    return {"logits": logits, "logits_more_padding": logits_more_padding}


# ---------------------------------------------------------------- relations (checked where the comparison is made)
def padded_positions(inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """encode()'s values at padded positions mean nothing: not graded (still required finite)."""
    padded = (inputs["tokens"] == inputs["pad_id"])[..., None]      # (batch, seq, 1)
    return {"hidden": padded, "hidden_more_padding": padded}


def real_positions_unchanged(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """More pad columns change nothing that a real token sees."""
    real = inputs["tokens"] != inputs["pad_id"]                     # (batch, seq)
    if torch.allclose(outputs["hidden"][real], outputs["hidden_more_padding"][real], rtol=1e-4, atol=1e-5):
        return {}
    return {"padding_changes_real_tokens": _("more pad columns changed encode() at the real tokens")}


def logits_unchanged(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """More pad columns change no logit."""
    if torch.allclose(outputs["logits"], outputs["logits_more_padding"], rtol=1e-4, atol=1e-5):
        return {}
    return {"padding_changes_logits": _("more pad columns changed the logits")}


def ends_with_a_norm(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """The encoder's last step is a LayerNorm (norm2 of the last Post-LN layer, or a Pre-LN stack's final norm):
    with that norm's weight and bias taken out, every row has mean 0 and variance 1, whatever came before."""
    last = "encoder.norm" if bool(inputs["norm_first"]) else f"encoder.layers.{int(inputs['num_layers']) - 1}.norm2"
    hidden = outputs["hidden"].double()
    rows = (hidden - inputs[f"{P}{last}.bias"].double()) / inputs[f"{P}{last}.weight"].double()
    if torch.allclose(rows.mean(-1), torch.zeros(()).double(), atol=1e-3) and \
            torch.allclose(rows.var(-1, unbiased=False), torch.ones(()).double(), atol=1e-2):
        return {}
    return {"not_normalised": "the encoder's output is not layer-normalised: a Post-LN stack ends with its last "
                              "layer's norm2, a Pre-LN stack with its own final norm"}


PROBES = {"pool": pool, "logits": logits, "encoded": encoded, "defaults": defaults, "attention_ignores_padding": attention_ignores_padding,
          "padding_invariance": padding_invariance}

# ---------------------------------------------------------------- the public cases (13.5 points)
# PyTorch's ready-made counterparts of this chapter's components (fnmatch patterns on the parts of a name);
# your own chapters 04 and 05 (from .encoder import Encoder ...) are not among them.
READY_MADE = {"classifier.py": ["Transformer*", "MultiheadAttention", "multi_head_attention_forward",
                                "scaled_dot_product_attention", "_scaled_dot_product_*", "LayerNorm", "layer_norm",
                                "AdaptiveAvgPool*", "adaptive_avg_pool*"]}

# every padding case (hidden ones too): the values are the reference's, and more padding changes none of them
ATTENTION_PADDING = {"relation": real_positions_unchanged, "ignore": padded_positions}
LOGITS_PADDING = {"relation": logits_unchanged}
ENDS_WITH_A_NORM = {"relation": ends_with_a_norm}

SHAPE_HINT = ("If this is a shape error: masked_mean must return (batch, d_model) (the mean over the positions, "
              "dim=1) for the head nn.Linear(d_model, num_classes), and the encoder takes the padding mask as "
              "(batch, 1, 1, seq): mask[:, None, None, :].")

CASES = [
    Case("masked_mean leaves padding out", 1.5, "pool", lambda s: pool_inputs(s), seed=801,
         about="x (3, 6, 8), mask (3, 6) with 6, 3 and 6 real tokens; padded positions hold 10"),
    Case("masked_mean: a row of padding only gives zeros", 1.0, "pool", lambda s: pool_inputs(s, empty_row=True),
         seed=802, about="the last row has no real token: its mean is zeros, not NaN",
         hint="Divide by the number of real tokens clamped to at least 1 (count.clamp(min=1)), so that an empty "
              "row gives 0 / 1 = 0 instead of 0 / 0 = NaN.", hint_on=("nonfinite",)),
    Case("masked_mean: float64 in, float64 out", 0.5, "pool", lambda s: pool_inputs(s, dtype=torch.float64),
         seed=803, about="the dtype of x is kept (the count converted to x's dtype)", rtol=1e-7, atol=1e-9),
    Case("no encoder layers, no padding: embeddings × √d_model", 1.0, "logits",
         lambda s: model_inputs(s, layers=0, padded=False), seed=804,
         about="num_layers=0 and full rows: logits = head(mean(embed(tokens) + PE)), which tests the embedding "
               "alone", hint_if_raises=SHAPE_HINT),
    Case("logits of a padded batch (Post-LN)", 2.0, "logits", lambda s: model_inputs(s), seed=805,
         about="vocabulary 13, d_model 16, 4 heads, 2 layers, norm_first=False; rows of 7, 4 and 1 tokens",
         hint_if_raises=SHAPE_HINT),
    Case("logits of a padded batch (Pre-LN)", 1.0, "logits",
         lambda s: model_inputs(s, batch=4, seq=9, norm_first=True), seed=806,
         about="norm_first=True: the encoder's Pre-LN stack with its final norm", hint_if_raises=SHAPE_HINT),
    Case("logits of a batch padded with pad_id 3", 1.0, "logits",
         lambda s: model_inputs(s, batch=3, seq=7, pad_id=3), seed=813,
         about="built with pad_id=3: id 3 is the padding and id 0 an ordinary token; the mask comes from the "
               "model's pad_id", hint_if_raises=SHAPE_HINT),
    Case("attention ignores padding", 1.0, "attention_ignores_padding", lambda s: model_inputs(s, extra=5),
         seed=807, about="encode(tokens) at the real positions, and unchanged when 5 pad columns are added",
         hint_if_raises=SHAPE_HINT, **ATTENTION_PADDING),
    Case("more padding changes no logit", 1.5, "padding_invariance",
         lambda s: model_inputs(s, batch=4, seq=8, extra=6), seed=808,
         about="the same reviews padded to 8 and to 14 columns give the same logits, the reference's",
         hint_if_raises=SHAPE_HINT, **LOGITS_PADDING),
    Case("a row of padding only stays finite", 1.0, "logits", lambda s: model_inputs(s, empty_row=True), seed=809,
         about="the last row is all padding: its pooled vector is zeros, so its logits are head.bias",
         hint="A row with no real token must give finite logits: masked scores are filled with a finite "
              "number (chapter 02) and masked_mean divides by the count clamped to at least 1.",
         hint_on=("nonfinite",), hint_if_raises=SHAPE_HINT),
    Case("an explicit mask is used", 0.5, "logits",
         lambda s: {**model_inputs(s, padded=False), "mask": _keep(3, 7)}, seed=810,
         about="forward(tokens, mask): the mask given (batch, seq) hides positions that are not pad_id, in the "
               "attention and in the pooling", hint_if_raises=SHAPE_HINT),
    Case("the encoder ends with a layer norm", 0.5, "encoded", lambda s: model_inputs(s, padded=False), seed=811,
         about="encode() of full rows, Post-LN: the last layer's norm2 is the last step", **ENDS_WITH_A_NORM),
    Case("defaults: two classes, dropout 0.1, max_len 512, pad_id 0", 0.5, "defaults",
         lambda s: {"seed": torch.tensor(s)}, seed=812,
         about="TransformerClassifier built with its defaults"),
    ready_made_case(READY_MADE, 0.5, about="no PyTorch ready-made attention, encoder layer, layer norm or "
                                           "pooling layer (read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "padding_in_pool": "The pooling averages the padding in (a plain mean over all positions, x.mean(dim=1) or "
                       "nn.AdaptiveAvgPool1d): a short review padded to a long batch is diluted by pad vectors. "
                       "Sum x where mask is True and divide by the number of real tokens: "
                       "x.masked_fill(~mask[..., None], 0).sum(1) / mask.sum(1, keepdim=True).clamp(min=1).",
    "no_padding_mask": "The encoder gets no padding mask, so real tokens attend to the padding and adding pad "
                       "columns changes the logits: build mask = tokens != pad_id (batch, seq) and call "
                       "self.encoder(x, mask=mask[:, None, None, :]).",
    "mean_over_full_length": "masked_mean sums the real tokens but divides by the full length (seq): a short review "
                             "is diluted. Divide by the number of real tokens, mask.sum(1, keepdim=True).clamp(min=1).",
    "first_token_pooling": "The sentence vector is the first token's hidden state (x[:, 0], as BERT's [CLS]): this "
                           "model has no [CLS] token; take the masked mean over the real tokens.",
    "mask_argument_ignored": "forward(tokens, mask) ignores the mask it is given and rebuilds one from pad_id: use "
                             "the mask argument when it is not None, in the encoder and in the pooling.",
    "pre_ln_without_final_norm": "The encoder's output is not layer-normalised, so its last step is no LayerNorm: "
                                 "with norm_first=False every layer ends with its norm, x = norm2(x + ffn(x)) "
                                 "(Post-LN, chapter 05's Encoder); layers that compute Pre-LN, x + sublayer(norm(x)), "
                                 "without the stack's final norm (seed 000's) end with a residual sum instead.",
    "pad_id_ignored": "Padding is taken to be token 0 whatever pad_id the model was built with: the mask must come "
                      "from the pad_id given to __init__ (kept as self.pad_id), tokens != self.pad_id, in encode and "
                      "in forward, so that with pad_id=3 token 0 is a real token and token 3 is padding.",
    "pool_wrong_axis": "masked_mean averages over the wrong axis (the d_model features, dim=-1): a sentence "
                       "vector is the mean over the positions, dim=1, so the result is (batch, d_model).",
    "no_sqrt_scale": "The token embeddings are not multiplied by √d_model: look the tokens up with "
                     "self.embed(tokens), chapter 04's TokenEmbedding, which scales them (not "
                     "self.embed.embedding(tokens), not a plain nn.Embedding).",
}

# Known mistakes recognised by the exception they raise (re.search on the description of the exception):
# the probe refuses an embed that is a plain nn.Embedding (its weights would not even load).
RAISES = {
    "no_sqrt_scale": r"embed is a plain nn\.Embedding",
}
