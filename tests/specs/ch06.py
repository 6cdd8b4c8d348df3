"""Chapter 06 checks: padding_mask, causal_mask, target_mask; DecoderLayer and Decoder; Transformer.

Each case builds your module with the reference's weights (saved with the inputs, so nothing depends on
your initialisation), in evaluation mode, and loads them by parameter name (``self_attn.w_q.weight``,
``cross_attn.w_k.bias``, ``norm3.weight``, ``layers.1.ffn.linear1.weight``, ``decoder.norm.bias``,
``generator.weight`` ...): the names are part of the contract. Masks are bool, True = may attend.
Public cases use the seeds below; the grader adds hidden cases with other seeds and shapes. Expected
outputs come from the reference (tests/reference/ch06.pt).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib.provided.chapters import load_spec, load_spec_part
from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "06"
TITLE = "Decoder and masks"
MODULES = ["masks.py", "decoder.py", "transformer.py"]  # the learner's files this chapter grades
REQUIRES = ["04", "05"]  # TokenEmbedding and PositionalEncoding (04); LayerNorm, FFN, Encoder (05, on 03 and 02)

_ch05 = load_spec("05")  # chapter 05's loader of parameters by name
P = _ch05.P  # prefix of the inputs that are parameters, e.g. "p:cross_attn.w_q.weight"


# ---------------------------------------------------------------- inputs (deterministic by seed): ch06_inputs.py
_inputs = load_spec_part("06", "inputs")
mask_inputs, decoder_inputs, model_inputs = _inputs.mask_inputs, _inputs.decoder_inputs, _inputs.model_inputs
leak_inputs, fully_masked_rows, config_inputs = _inputs.leak_inputs, _inputs.fully_masked_rows, _inputs.config_inputs


# ---------------------------------------------------------------- probes (they call your code)
def _load(module: object, what: str, inputs: dict[str, Tensor], dtype: torch.dtype) -> nn.Module:
    """``module`` in ``dtype``, in evaluation mode, holding the case's parameters (by name): chapter 05's loader."""
    return _ch05._load(module, what, {**inputs, "x": torch.empty(0, dtype=dtype)})


def padding(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"mask": impl.masks.padding_mask(inputs["tokens"], int(inputs["pad_id"]))}


def causal(impl, inputs: dict[str, Tensor]) -> Outputs:
    """causal_mask(n, device="cpu"), and causal_mask(n) with its default device, the CPU."""
    default = impl.masks.causal_mask(int(inputs["n"]))
    return {"mask": impl.masks.causal_mask(int(inputs["n"]), device="cpu"), "mask_default_device": default,
            "default_device_is_cpu": torch.tensor(getattr(getattr(default, "device", None), "type", "") in ("cpu",))}


def target(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"mask": impl.masks.target_mask(inputs["tokens"], int(inputs["pad_id"]))}


def _build_decoder(impl, inputs: dict[str, Tensor]) -> nn.Module:
    d_model = inputs["x"].shape[-1]
    args = (d_model, int(inputs["num_heads"]), int(inputs["d_ff"]))
    first = bool(inputs["norm_first"])
    p = float(inputs.get("dropout", 0.1))
    if "num_layers" in inputs:
        module = impl.decoder.Decoder(int(inputs["num_layers"]), *args, dropout=p, norm_first=first)
        return _load(module, "Decoder", inputs, inputs["x"].dtype)
    module = impl.decoder.DecoderLayer(*args, dropout=p, norm_first=first)
    return _load(module, "DecoderLayer", inputs, inputs["x"].dtype)


def _decode(module: nn.Module, inputs: dict[str, Tensor]) -> Tensor:
    return module(inputs["x"], inputs["memory"], tgt_mask=inputs.get("tgt_mask"),
                  memory_mask=inputs.get("memory_mask"))


def decoder_forward(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": _decode(_build_decoder(impl, inputs), inputs)}


def decoder_training(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Built with the case's dropout, run by chapter 05's ``seeded_training`` (both attentions' dropout read,
    then silenced)."""
    return _ch05.seeded_training(_build_decoder(impl, inputs), lambda m: _decode(m, inputs))


def decoder_gradients(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Backpropagate a fixed random weighting of the output to x, memory and every parameter."""
    g = torch.Generator().manual_seed(7)
    module = _build_decoder(impl, inputs)
    inputs["x"].requires_grad_(True)
    inputs["memory"].requires_grad_(True)
    output = _decode(module, inputs)
    if not isinstance(output, Tensor) or not output.requires_grad:
        raise CheckFailure("no gradient flows back from the output: did you detach, use .data, or go through numpy?")
    (output * torch.randn(output.shape, generator=g, dtype=output.dtype)).sum().backward()
    params = dict(module.named_parameters())
    grads = {"grad_x": inputs["x"].grad, "grad_memory": inputs["memory"].grad}
    grads.update({f"grad_{k[len(P):]}": params[k[len(P):]].grad for k in inputs if k.startswith(P)})
    missing = [k for k, v in grads.items() if v is None]
    if missing:
        raise CheckFailure("no gradient reached {names}: use every parameter, and memory in the cross-attention, in "
                           "torch operations", names=", ".join(missing))
    return grads


def _build_model(impl, inputs: dict[str, Tensor]) -> nn.Module:
    config = impl.transformer.TransformerConfig(
        src_vocab=int(inputs["src_vocab"]), tgt_vocab=int(inputs["tgt_vocab"]), d_model=int(inputs["d_model"]),
        num_heads=int(inputs["num_heads"]), d_ff=int(inputs["d_ff"]), num_layers=int(inputs["num_layers"]),
        dropout=0.1, max_len=64, pad_id=int(inputs["pad_id"]), norm_first=bool(inputs["norm_first"]))
    dtype = inputs[f"{P}generator.weight"].dtype
    return _load(impl.transformer.Transformer(config), "Transformer", inputs, dtype)


def model_forward(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"logits": _build_model(impl, inputs)(inputs["src"], inputs["tgt"])}


def future_leak(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The logits of the target and of the target changed at ``changed_at`` (``leak_inputs``)."""
    model = _build_model(impl, inputs)
    with torch.no_grad():
        logits = model(inputs["src"], inputs["tgt"])                      # (batch, tgt_seq, tgt_vocab)
        logits_changed = model(inputs["src"], inputs["tgt_changed"])      # (batch, tgt_seq, tgt_vocab)
    return {"logits": logits, "logits_changed": logits_changed}


def no_leak(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """Checked with the comparison, never beside your code: no logit before ``changed_at`` changes, its own do."""
    t = int(inputs["changed_at"])
    before, after = outputs["logits"], outputs["logits_changed"]  # (batch, tgt_seq, tgt_vocab) each
    leak = not torch.allclose(after[:, :t], before[:, :t], rtol=1e-4, atol=1e-5)
    blind = torch.allclose(after[:, t], before[:, t], rtol=0.0, atol=1e-4)
    return {**({"earlier_change": _("changing a target token changed the logits at earlier positions")} if leak else {}),
            **({"no_later_change": _("changing a target token changed nothing at its own position")} if blind else {})}


def model_config(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The paper's base configuration, and weight tying on a small shared-vocabulary model."""
    tf = impl.transformer
    base = tf.TransformerConfig.base(37000, 37000)
    other = tf.TransformerConfig.base(32000, 34000)
    out = {name: torch.tensor(float(getattr(base, name, float("nan"))), dtype=torch.float64)
           for name in ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "tie_embeddings", "share_embeddings")}
    out["share_embeddings_two_vocabularies"] = torch.tensor(float(getattr(other, "share_embeddings", float("nan"))),
                                                            dtype=torch.float64)
    vocab, d_model = int(inputs["vocab"]), int(inputs["d_model"])
    small = tf.TransformerConfig(vocab, vocab, d_model=d_model, num_heads=2, d_ff=16, num_layers=1,
                                 tie_embeddings=True, share_embeddings=True)
    model = tf.Transformer(small)
    out["generator_is_tgt_embed"] = torch.tensor(model.generator.weight is model.tgt_embed.embedding.weight)
    out["src_embed_is_tgt_embed"] = torch.tensor(model.src_embed.embedding.weight is model.tgt_embed.embedding.weight)
    out["num_parameters"] = torch.tensor(sum(p.numel() for p in model.parameters()))
    two = tf.Transformer(tf.TransformerConfig(vocab, vocab + 2, d_model=d_model, num_heads=2, d_ff=16, num_layers=1,
                                              tie_embeddings=True))
    out["two_vocabularies: generator_is_tgt_embed"] = torch.tensor(two.generator.weight is two.tgt_embed.embedding.weight)
    # base(src, tgt) shares only equal vocabularies, however the sizes compare; sharing two raises ValueError
    out["base(larger src).share_embeddings"] = torch.tensor(bool(tf.TransformerConfig.base(vocab + 1, vocab).share_embeddings))
    out["base(equal, computed).share_embeddings"] = torch.tensor(bool(tf.TransformerConfig.base(
        int(inputs["vocab"]) * 1000, vocab * 1000).share_embeddings))
    for name, (src, tgt) in {"smaller src": (vocab, vocab + 1), "larger src": (vocab + 1, vocab),
                             "equal, computed": (int(inputs["vocab"]) * 1000, vocab * 1000)}.items():
        raised: BaseException | None = None
        try:
            tf.Transformer(tf.TransformerConfig(src, tgt, d_model=d_model, num_heads=2, d_ff=8, num_layers=0,
                                                share_embeddings=True))
        except Exception as exc:  # noqa: BLE001 - which exception it is, is what is checked
            raised = exc
        out[f"share_embeddings, {name}: raises ValueError"] = torch.tensor(isinstance(raised, ValueError))
    plain = tf.TransformerConfig(vocab, vocab)  # the dataclass's defaults: the base sizes, pad_id 0, Post-LN, untied
    out.update({f"defaults.{k}": torch.tensor(float(getattr(plain, k)), dtype=torch.float64) for k in (
        "d_model", "num_heads", "d_ff", "num_layers", "dropout", "max_len", "pad_id", "norm_first", "tie_embeddings",
        "share_embeddings")})
    dec = impl.decoder
    out.update(_ch05.settings({"decoder layer": dec.DecoderLayer(d_model, 2, 16), "decoder": dec.Decoder(1, d_model, 2, 16)}))
    return out


PROBES = {"padding": padding, "causal": causal, "target": target, "decoder": decoder_forward,
          "training": decoder_training, "gradients": decoder_gradients, "model": model_forward, "future": future_leak,
          "config": model_config}

# ---------------------------------------------------------------- the public cases (18 points)
# PyTorch's ready-made counterparts of this chapter's components (fnmatch patterns on the parts of a name).
# masks.py may use anything (torch.tril, nn.Transformer.generate_square_subsequent_mask): that is how a
# mask is made. Your own earlier chapters (from .encoder import ...) are not ready-mades.
_LAYERS = ["Transformer*", "MultiheadAttention", "multi_head_attention_forward", "scaled_dot_product_attention",
           "_scaled_dot_product_*", "LayerNorm", "layer_norm", "native_layer_norm"]
READY_MADE = {"decoder.py": _LAYERS, "transformer.py": _LAYERS}

NO_LEAK = {"relation": no_leak}  # every future-leak case (hidden ones too)
# A Transformer in float64: its positional table may be computed in float32 (chapter 04's docstring allows it), which
# moves logits by a few 1e-8; computing the layers in float32 moves them by 1e-7 to 1e-6.
FLOAT64_MODEL = {"rtol": 1e-6, "atol": 1e-7}

CROSS_HINT = ("In the cross-attention the queries come from the decoder and the keys and values from the encoder: "
              "self.cross_attn(x, memory, memory, mask=memory_mask) (with h = norm2(x) for the query in Pre-LN); "
              "its output has tgt_seq rows, like x, and memory_mask (batch, 1, 1, src_seq) masks memory's positions.")

MODEL_HINT = ("forward builds src_mask = padding_mask(src, pad_id), (batch, 1, 1, src_seq), for the encoder and "
              "the cross-attention, and tgt_mask = target_mask(tgt, pad_id), (batch, 1, tgt_seq, tgt_seq), for the "
              "decoder's self-attention; decode passes src_mask on as memory_mask.")

CASES = [
    Case("padding_mask: (batch, 1, 1, seq), True = a real token", 1.0, "padding", lambda s: mask_inputs(s), seed=601,
         about="3 sequences of 6 with 0, 1 and 2 pads at the end; pad_id 0"),
    Case("padding_mask with pad_id 1", 0.5, "padding", lambda s: mask_inputs(s, batch=2, seq=5, pad_id=1), seed=602,
         about="the pad id comes from the argument, not a constant 0"),
    Case("causal_mask: lower triangle, diagonal included", 1.0, "causal", lambda s: mask_inputs(s, seq=5), seed=603,
         about="causal_mask(5) (5, 5) bool: query i may attend to keys 0 .. i"),
    Case("target_mask: padding and causal", 1.0, "target", lambda s: mask_inputs(s, batch=3, seq=5), seed=604,
         about="(batch, 1, seq, seq): a key is visible when it is not padding and not ahead"),
    Case("decoder layer, Post-LN, causal mask, src_seq != tgt_seq", 1.5, "decoder", lambda s: decoder_inputs(s),
         seed=605, about="tgt_seq 5, src_seq 7: self-attention with a causal mask, cross-attention to memory",
         hint_if_raises=CROSS_HINT),
    Case("decoder layer, Post-LN, target and memory masks", 1.5, "decoder",
         lambda s: decoder_inputs(s, batch=3, tgt_seq=6, src_seq=6, tgt_mask="target", memory_mask=True), seed=606,
         about="tgt_mask (batch, 1, 6, 6) for the self-attention, memory_mask (batch, 1, 1, 6) for the "
               "cross-attention", hint_if_raises=CROSS_HINT),
    Case("decoder layer, Pre-LN, both masks", 1.0, "decoder",
         lambda s: decoder_inputs(s, batch=3, tgt_seq=5, src_seq=8, d_model=16, heads=4, norm_first=True,
                                  tgt_mask="target", memory_mask=True), seed=607,
         about="norm_first=True: x = x + attn(norm(x)) for each of the three sublayers", hint_if_raises=CROSS_HINT),
    Case("a fully masked query row stays finite", 0.5, "decoder",
         lambda s: decoder_inputs(s, batch=3, tgt_seq=5, src_seq=4, tgt_mask="left", memory_mask=True), seed=608,
         about="a target padded at the start: its first rows of tgt_mask are all False; finite values, not graded",
         ignore=lambda inputs: fully_masked_rows(inputs), hint_if_raises=CROSS_HINT),
    Case("decoder of 3 layers, Post-LN", 1.0, "decoder",
         lambda s: decoder_inputs(s, layers=3, tgt_mask="target", memory_mask=True), seed=609,
         about="Decoder: the layers in order, the same memory and masks for each; no final norm (norm is None)",
         hint_if_raises=CROSS_HINT),
    Case("decoder of 2 layers, Pre-LN, final norm", 1.0, "decoder",
         lambda s: decoder_inputs(s, tgt_seq=6, src_seq=4, layers=2, norm_first=True, tgt_mask="target",
                                  memory_mask=True), seed=610,
         about="Decoder with norm_first=True ends with its own LayerNorm, self.norm", hint_if_raises=CROSS_HINT),
    Case("gradients reach x, memory and every parameter", 1.0, "gradients",
         lambda s: decoder_inputs(s, tgt_mask="target", memory_mask=True), seed=611,
         about="backward through a Post-LN decoder layer with both masks", hint_if_raises=CROSS_HINT),
    Case("float64 in, float64 out", 0.5, "decoder",
         lambda s: decoder_inputs(s, norm_first=True, tgt_mask="target", memory_mask=True, dtype=torch.float64),
         seed=612, about="the dtype of the inputs is kept", rtol=1e-7, atol=1e-9, hint_if_raises=CROSS_HINT),
    Case("Transformer logits", 1.5, "model", lambda s: model_inputs(s), seed=613,
         about="src (2, 7), tgt (2, 5), both padded; forward builds its masks from pad_id and returns logits "
               "(batch, tgt_seq, tgt_vocab)", hint_if_raises=MODEL_HINT),
    Case("Transformer in float64", 0.5, "model", lambda s: model_inputs(s, dtype=torch.float64, norm_first=True),
         seed=617, about="float64 weights give float64 logits, computed in float64 (a float32 positional table "
                         "is close enough)", hint_if_raises=MODEL_HINT, **FLOAT64_MODEL),
    Case("no future leak", 1.0, "future", lambda s: leak_inputs(s, tgt_seq=6, pad_id=2), seed=614, **NO_LEAK,
         about="change target token 3: the logits at positions 0, 1, 2 must not change (pad_id 2)",
         hint="Changing a later target token changed earlier outputs: the decoder's self-attention must use "
              "target_mask(tgt, pad_id), which hides the keys ahead of each query.", hint_on=("earlier_change",),
         hint_if_raises=MODEL_HINT),
    Case("base configuration and weight tying", 1.0, "config", lambda s: config_inputs(s), seed=615,
         about="TransformerConfig.base: 512, 8 heads, 2048, 6 layers, dropout 0.1, tied; generator.weight is "
               "tgt_embed.embedding.weight (one Parameter)",
         hint="base(src_vocab, tgt_vocab) is the paper's model (Table 3, section 3.4): tie_embeddings=True, and "
              "share_embeddings only when the two vocabularies are one (src_vocab == tgt_vocab); tying assigns "
              "the Parameter itself to the generator's weight (the target embedding's weight), not a copy."),
    Case("decoder layer dropout, training mode only", 1.0, "training",
         lambda s: {**decoder_inputs(s, batch=3, tgt_seq=6, tgt_mask="target", memory_mask=True),
                    "dropout": torch.tensor(0.3)}, seed=616, hint_if_raises=CROSS_HINT,
         about="dropout 0.3 on each of the three sublayers' outputs before its residual sum, and given to both "
               "attentions (theirs set to 0, then a seeded training pass: the reference's values); none in "
               "evaluation mode"),
    Case("decoder layer dropout, Pre-LN, training mode only", 1.0, "training",
         lambda s: {**decoder_inputs(s, batch=3, tgt_seq=6, norm_first=True, tgt_mask="target", memory_mask=True),
                    "dropout": torch.tensor(0.3)}, seed=618, hint_if_raises=CROSS_HINT,
         about="norm_first=True: dropout 0.3 on each of the three sublayers' outputs before its residual sum, as in "
               "Post-LN (seeded, the attentions' own set to 0); none in evaluation mode"),
    ready_made_case(READY_MADE, 0.5, about="no PyTorch ready-made decoder, transformer, attention or layer norm "
                                           "(read from the source, not run); masks.py may use torch.tril"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "causal_off_by_one": "The causal mask leaves out the diagonal, so a position cannot attend to itself (and the "
                         "first one to nothing): query i may attend to keys 0 .. i, itself included; use "
                         "torch.tril(torch.ones(n, n, dtype=torch.bool)) (diagonal=0), not diagonal=-1 or ~triu.",
    "causal_upper": "The causal mask is upper-triangular (torch.triu): each position sees the positions after it "
                    "and not those before. Query i may attend to keys 0 .. i: torch.tril(torch.ones(n, n, "
                    "dtype=torch.bool)).",
    "causal_not_tril": "The causal mask is ~tril (or triu with diagonal=1): it marks the future, the keys to hide, "
                       "where the course's masks mark what may be attended (True = may attend): use tril itself.",
    "causal_one_ahead": "The causal mask lets each position see one token ahead (tril with diagonal=1): keep "
                        "diagonal=0, so that query i sees keys 0 .. i only.",
    "padding_mask_inverted": "The padding mask is inverted: True must mark a real token (tokens != pad_id), which "
                             "may be attended to; padding is False.",
    "decoder_sublayer_dropout_missing": "The cross-attention sublayer's output is not dropped: each of the three "
                                        "sublayers is x + self.dropout(sublayer(...)) (norm3 for the FFN).",
    "decoder_pre_ln_dropout_missing": "With norm_first=True no sublayer's output is dropped in training mode (the "
                                      "Post-LN branch drops them): in Pre-LN too, each of the three is "
                                      "x + self.dropout(sublayer(norm(x))), with norm1, norm2 and norm3 in turn.",
    "decoder_pre_ln_cross_dropout_missing": "With norm_first=True the cross-attention sublayer's output is not "
                                            "dropped (the self-attention's and the FFN's are): in Pre-LN too it is "
                                            "x + self.dropout(cross_attn(norm2(x), memory, memory, ...)).",
    "generator_tied_to_src": "The generator is tied to the source embedding: it predicts target tokens, so its "
                             "weight is the target embedding's, tgt_embed.embedding.weight (they differ when the "
                             "vocabularies differ).",
    "padding_on_queries": "The padding mask is on the queries, (batch, 1, seq, 1), so padded rows are masked instead "
                          "of padded keys: it must be (batch, 1, 1, seq), keep[:, None, None, :], so that no query "
                          "attends to a padded key.",
    "memory_mask_not_passed": "The encoder's padding mask does not reach the cross-attention, so the decoder attends "
                              "to padded source positions: call self.cross_attn(x, memory, memory, mask=memory_mask) "
                              "(and pass src_mask on as memory_mask in Transformer.decode).",
    "self_attn_unmasked": "The decoder's self-attention is not masked, so each position sees the target tokens after "
                          "it (a future leak): call self.self_attn(x, x, x, mask=tgt_mask), and give it "
                          "target_mask(tgt, pad_id) in Transformer.forward.",
    "cross_attn_q_from_encoder": "The cross-attention takes its queries from the encoder and its keys and values "
                                 "from the decoder: the decoder asks (queries from x) and the encoder answers "
                                 "(keys and values from memory): self.cross_attn(x, memory, memory, mask=memory_mask).",
    "softmax_logits": "Transformer.forward returns probabilities (a softmax over the vocabulary): return the "
                      "generator's logits, without softmax; the loss (chapter 07) applies log-softmax itself.",
    "tie_copies_weights": "The generator's weight is a copy of the target embedding, not the same Parameter, so the "
                          "two drift apart in training: make generator.weight the target embedding's own Parameter, "
                          "tgt_embed.embedding.weight, by assignment (no clone, no nn.Parameter(...) around it).",
}

# A known mistake that crashes instead of returning wrong values: queries from memory give src_seq rows,
# which cannot be added to x's tgt_seq rows in the residual connection (raised in decoder.py, or where
# no file of yours is named; a crash in another of your files is another mistake).
RAISES = {"cross_attn_q_from_encoder": r"must match the size of tensor b \(\d+\) at non-singleton dimension 1\b"
                                       r"(?! \(at (?!decoder\.py))"}
