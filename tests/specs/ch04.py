"""Chapter 04 checks: sinusoidal_table(max_len, d_model), PositionalEncoding(d_model, dropout=0.1, max_len=5000)
and TokenEmbedding(vocab_size, d_model).

The modules run in evaluation mode (dropout off) except in the dropout case, which seeds PyTorch's
generator and checks what dropout must do rather than which elements it drops (``dropout_done``, run by
the checks, never beside your code; the probes only return tensors). TokenEmbedding gets the
reference's weights (saved with the inputs), so nothing depends on your initialisation. Public cases
use the seeds below; the grader adds hidden cases with other seeds and shapes. Expected outputs come
from the reference (tests/reference/ch04.pt).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from course_lib.provided.checking import _, Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "04"
TITLE = "Positional encoding"
MODULES = ["positional.py"]  # the learner's files this chapter grades


# ---------------------------------------------------------------- inputs (deterministic by seed)
def table_size(seed: int, max_len: int = 20, d_model: int = 8) -> dict[str, Tensor]:
    """The two integers of a table; the seed plays no part (the table is a fixed function)."""
    return {"max_len": torch.tensor(max_len), "d_model": torch.tensor(d_model)}


def embeddings(seed: int, batch: int = 2, seq: int = 7, d_model: int = 16, max_len: int = 50,
               dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """A batch of embeddings x (batch, seq, d_model) for a PositionalEncoding of length ``max_len``."""
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(batch, seq, d_model, generator=g, dtype=dtype), "max_len": torch.tensor(max_len)}


def tokens(seed: int, batch: int = 2, seq: int = 5, vocab_size: int = 11, d_model: int = 16) -> dict[str, Tensor]:
    """Token ids (batch, seq) and the weight (vocab_size, d_model) to load into TokenEmbedding.embedding."""
    g = torch.Generator().manual_seed(seed)
    return {"tokens": torch.randint(0, vocab_size, (batch, seq), generator=g),
            "embedding.weight": torch.randn(vocab_size, d_model, generator=g) / d_model ** 0.5}


# ---------------------------------------------------------------- probes (they call your code)
DROP_P = 0.5  # the dropout case's probability
RATE_SE = 5.0  # a share of zeroed elements more than 5 binomial standard errors from p is a wrong rate (chapter 02)


def encoding(impl, d_model: int, max_len: int, dropout: float = 0.1) -> nn.Module:
    """Your PositionalEncoding, checked to be an nn.Module."""
    module = impl.positional.PositionalEncoding(d_model, dropout=dropout, max_len=max_len)
    if not isinstance(module, nn.Module):
        raise CheckFailure("PositionalEncoding must be an nn.Module (class PositionalEncoding(nn.Module))")
    return module


def table(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"table": impl.positional.sinusoidal_table(int(inputs["max_len"]), int(inputs["d_model"]))}


def add(impl, inputs: dict[str, Tensor]) -> Outputs:
    """x + pe[:, :seq] in evaluation mode, with the module in the dtype of x."""
    x = inputs["x"]
    module = encoding(impl, x.size(-1), int(inputs["max_len"])).to(x.dtype).eval()
    output = module(x)
    if isinstance(output, Tensor) and output.dim() == 3 and output.shape[:2] == x.shape[:2] \
            and output.size(-1) == 2 * x.size(-1):
        raise CheckFailure("the output has shape {got} for an input {shape}: twice the features, so x and the "
                           "encoding were joined side by side, not summed", got=tuple(output.shape), shape=tuple(x.shape))
    return {"output": output}


def buffer(impl, inputs: dict[str, Tensor]) -> Outputs:
    """How the module keeps its table: a buffer (not a parameter), moved by .to(), and its values.

    Whether state_dict() holds it is not asked: register_buffer('pe', table, persistent=False) is as right. The
    table is a fixed function of (max_len, d_model), built again with every module, so saving it or not changes
    no output, loss or gradient, and a checkpoint of the same code loads either way (issue 26)."""
    module = encoding(impl, int(inputs["d_model"]), int(inputs["max_len"]))
    pe = getattr(module, "pe", None)
    if not isinstance(pe, Tensor):
        raise CheckFailure("PositionalEncoding must keep its table in self.pe: "
                           "self.register_buffer('pe', table) with table of shape (1, max_len, d_model)")
    flags = {
        "pe_is_a_buffer": "pe" in dict(module.named_buffers(recurse=False)),
        "pe_is_a_parameter": "pe" in dict(module.named_parameters(recurse=False)),
        "pe_requires_grad": pe.requires_grad,
        "pe_follows_to(float64)": getattr(module.to(torch.float64), "pe", pe).dtype is torch.float64,
    }
    return {**{k: torch.tensor(bool(v)) for k, v in flags.items()}, "pe": pe.detach().float().clone()}


def dropout(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The module with p = DROP_P in evaluation mode (x + pe), then in training mode on a seeded generator."""
    x = inputs["x"]
    module = encoding(impl, x.size(-1), int(inputs["max_len"]), dropout=DROP_P)
    with torch.no_grad():
        output = module.eval()(x)  # (batch, seq, d_model): x + pe
        torch.manual_seed(int(inputs["max_len"]))
        training_output = module.train()(x)  # (batch, seq, d_model): some zeroed, the others scaled
    return {"output": output, "training_output": training_output}


def dropout_done(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """What dropout must do in training mode, judged where the comparison is made: {property: message} of those
    that fail. Which elements are dropped is not graded; the evaluation output is (against the reference)."""
    output, training = outputs["output"], outputs["training_output"]
    if training.shape != output.shape:
        return {"shape": _("in training mode the output must be a tensor of the input's shape")}
    kept = training != 0
    broken = {}
    if bool(kept.all()):
        broken["none_zeroed"] = _("in training mode no element was zeroed")
    share, se = 1 - float(kept.double().mean()), math.sqrt(DROP_P * (1 - DROP_P) / kept.numel())
    if 0 < share < 1 and abs(share - DROP_P) > RATE_SE * se:  # chapter 02's bound: 5 binomial standard errors
        broken["rate"] = _("in training mode {share} of the elements were zeroed, expected p = {p}").format(
            share=f"{share:.3f}", p=DROP_P)
    if not bool(kept.any()):
        broken["all_zeroed"] = _("in training mode every element was zeroed")
    elif not torch.allclose(training[kept], output[kept] / (1 - DROP_P), rtol=1e-4, atol=1e-5):
        broken["kept_scaled"] = _("in training mode the elements kept are not (x + pe) / (1 - p)")
    return broken


def too_long(impl, inputs: dict[str, Tensor]) -> Outputs:
    """A sequence longer than max_len must raise a ValueError that names both lengths (what was raised is
    read, not compared); its first max_len positions, as long as the table, must give x + pe, so that a
    module that always raises fails."""
    x, max_len = inputs["x"], int(inputs["max_len"])
    module = encoding(impl, x.size(-1), max_len).eval()
    with torch.no_grad():
        fitting = module(x[:, :max_len])  # (batch, max_len, d_model)
    raised: BaseException | None = None
    try:
        module(x)
    except Exception as exc:  # noqa: BLE001 - which exception it is, is what is checked
        raised = exc
    message = str(raised) if raised is not None else ""
    return {"raises_ValueError": torch.tensor(isinstance(raised, ValueError)),
            "message_names_seq_and_max_len": torch.tensor(str(x.size(1)) in message and str(max_len) in message),
            "output_at_max_len": fitting}


def token_embedding(impl, inputs: dict[str, Tensor]) -> nn.Module:
    """Your TokenEmbedding holding the case's weight."""
    vocab_size, d_model = inputs["embedding.weight"].shape
    module = impl.positional.TokenEmbedding(vocab_size, d_model)
    embedding = getattr(module, "embedding", None)
    if not isinstance(embedding, nn.Embedding) or tuple(embedding.weight.shape) != (vocab_size, d_model):
        raise CheckFailure("TokenEmbedding needs a member embedding = nn.Embedding(vocab_size, d_model): "
                           "the checks load their weights into it")
    with torch.no_grad():
        embedding.weight.copy_(inputs["embedding.weight"])
    return module


def embed(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"output": token_embedding(impl, inputs)(inputs["tokens"])}


def embed_gradient(impl, inputs: dict[str, Tensor]) -> Outputs:
    """Backpropagate a fixed random weighting of the output to embedding.weight."""
    g = torch.Generator().manual_seed(7)
    module = token_embedding(impl, inputs)
    output = module(inputs["tokens"])
    if not isinstance(output, Tensor) or not output.requires_grad:
        raise CheckFailure("no gradient flows back from the output: did you detach, use .data, or go through numpy?")
    (output * torch.randn(output.shape, generator=g, dtype=output.dtype)).sum().backward()
    if module.embedding.weight.grad is None:
        raise CheckFailure("no gradient reached embedding.weight: look the tokens up with self.embedding")
    return {"grad_embedding.weight": module.embedding.weight.grad}


def odd_width(impl, inputs: dict[str, Tensor]) -> Outputs:
    """sinusoidal_table(max_len, d_model + 1), an odd width, must raise a ValueError (what was raised is read,
    not compared); the even width must give its table, so that a function that always raises fails."""
    max_len, d_model = int(inputs["max_len"]), int(inputs["d_model"])
    raised: BaseException | None = None
    try:
        impl.positional.sinusoidal_table(max_len, d_model + 1)
    except Exception as exc:  # noqa: BLE001 - which exception it is, is what is checked
        raised = exc
    return {"raises_ValueError": torch.tensor(isinstance(raised, ValueError)),
            "table": impl.positional.sinusoidal_table(max_len, d_model)}


def defaults(impl, inputs: dict[str, Tensor]) -> Outputs:
    """PositionalEncoding(d_model) with its defaults (dropout 0.1, max_len 5000), and the spread of a fresh
    TokenEmbedding's weight (seeded), which the docstring promises N(0, 1/d_model); the statistics are judged by
    ``initialised_as_promised``."""
    d_model, vocab = int(inputs["d_model"]), int(inputs["vocab_size"])
    module = impl.positional.PositionalEncoding(d_model)
    drop = getattr(module, "dropout", None)
    torch.manual_seed(4)
    weight = impl.positional.TokenEmbedding(vocab, d_model).embedding.weight.detach()  # (vocab, d_model)
    return {"pe_shape": torch.tensor(tuple(getattr(module, "pe", torch.empty(0)).shape)),
            "dropout_p": torch.tensor(float(drop.p) if isinstance(drop, nn.Dropout) else math.nan, dtype=torch.float64),
            "weight_mean": weight.double().mean(), "weight_std": weight.double().std()}


def initialised_as_promised(outputs: Outputs, inputs: dict[str, Tensor]) -> dict[str, str]:
    """The weight's mean and standard deviation within 5 standard errors of N(0, 1/d_model)'s: for N draws of
    spread s, the mean's standard error is s / √N and the standard deviation's about s / √(2N)."""
    d_model, n = int(inputs["d_model"]), int(inputs["d_model"]) * int(inputs["vocab_size"])
    s = d_model ** -0.5
    mean, std = float(outputs["weight_mean"]), float(outputs["weight_std"])
    broken = {}
    if not abs(mean) <= RATE_SE * s / math.sqrt(n):
        broken["mean"] = _("a fresh TokenEmbedding's weight has mean {mean}, expected 0").format(mean=f"{mean:.3g}")
    if not abs(std - s) <= RATE_SE * s / math.sqrt(2 * n):
        broken["std"] = _("a fresh TokenEmbedding's weight has standard deviation {std}, expected 1/√d_model").format(
            std=f"{std:.4g}")
    return broken


PROBES = {"table": table, "add": add, "buffer": buffer, "dropout": dropout, "too_long": too_long, "embed": embed,
          "embed_gradient": embed_gradient, "odd": odd_width, "defaults": defaults}
DEFAULTS = {"relation": initialised_as_promised, "free": ("weight_mean", "weight_std")}

# ---------------------------------------------------------------- the public cases (11 points)
BFLOAT = {"rtol": 3e-2, "atol": 3e-2}     # bfloat16 keeps 8 bits of mantissa
# every dropout case (hidden ones too): the training output is judged by what it must hold, not by its values
DROPOUT = {"relation": dropout_done, "free": ("training_output",)}

# PyTorch's ready-made counterparts of this chapter's component (fnmatch patterns on the parts of a name).
# PyTorch has no positional encoding layer of its own; nn.Embedding is allowed (TokenEmbedding asks for it).
READY_MADE = {"positional.py": ["Transformer*", "MultiheadAttention"]}

CASES = [
    Case("sinusoidal_table: small table", 1.5, "table", lambda s: table_size(s), seed=401,
         about="max_len 20, d_model 8: sin in the even columns, cos in the odd ones"),
    Case("sinusoidal_table: 512 positions, d_model 64", 1.0, "table", lambda s: table_size(s, 512, 64), seed=402,
         about="a long, wide table (float32 rounding allowed at large positions)", atol=1e-4),
    Case("PositionalEncoding: x + pe", 1.5, "add", lambda s: embeddings(s), seed=403,
         about="batch 2, seq 7, d_model 16, max_len 50; evaluation mode"),
    Case("PositionalEncoding: seq = max_len", 0.5, "add", lambda s: embeddings(s, batch=3, seq=12, d_model=8, max_len=12),
         seed=404, about="a sequence as long as the table"),
    Case("pe is a buffer, not a parameter", 1.0, "buffer", lambda s: table_size(s, 16, 8), seed=405,
         about="registered buffer (1, max_len, d_model): moved by .to(), not trained (persistent or not)",
         hint="Store the table with self.register_buffer('pe', table), table of shape (1, max_len, d_model): a "
              "buffer moves with .to(), and the optimiser never sees it.",
         hint_on=("pe_is_a_buffer", "pe_is_a_parameter", "pe_requires_grad", "pe_follows_to(float64)")),
    Case("dropout in training mode", 1.0, "dropout", lambda s: embeddings(s, batch=4, seq=20), seed=406, **DROPOUT,
         about="p = 0.5: half the elements zeroed (within 5 binomial standard errors), the others (x + pe) / (1 - p); "
               "x + pe in evaluation mode", hint_on=("none_zeroed", "all_zeroed", "kept_scaled", "rate"),
         hint="Apply self.dropout to the sum x + pe[:, :seq] (not to x alone), and only through the nn.Dropout "
              "layer, which is off in evaluation mode."),
    Case("clear error past max_len", 0.5, "too_long", lambda s: embeddings(s, seq=15, d_model=8, max_len=12),
         seed=407, about="seq 15 > max_len 12 raises a ValueError naming 15 and 12; seq 12 gives x + pe",
         hint="Before adding, compare x.size(1) with max_len and raise ValueError(f\"... {seq} ... {max_len} ...\") "
              "saying to build the module with a larger max_len.",
         hint_on=("raises_ValueError", "message_names_seq_and_max_len")),
    Case("bfloat16 in, bfloat16 out", 0.5, "add", lambda s: embeddings(s, d_model=8, dtype=torch.bfloat16),
         seed=408, about="the module in bfloat16 keeps the dtype of x", **BFLOAT),
    Case("TokenEmbedding: scaled by √d_model", 1.5, "embed", lambda s: tokens(s), seed=409,
         about="vocabulary 11, d_model 16: the looked-up rows times √16 = 4"),
    Case("TokenEmbedding: gradient reaches the table", 0.5, "embed_gradient", lambda s: tokens(s, batch=3, seq=6),
         seed=410, about="backward to embedding.weight"),
    Case("sinusoidal_table: an odd d_model raises", 0.5, "odd", lambda s: table_size(s, 10, 6), seed=411,
         about="sinusoidal_table(10, 7) raises a ValueError (each frequency fills two columns); (10, 6) works"),
    Case("defaults and initialisation", 0.5, "defaults", lambda s: {"d_model": torch.tensor(32),
                                                                   "vocab_size": torch.tensor(400)}, seed=412,
         about="PositionalEncoding(32): dropout 0.1, pe (1, 5000, 32); a fresh TokenEmbedding(400, 32) has weights "
               "of mean 0 and standard deviation 1/√32 (within 5 standard errors)", **DEFAULTS),
    ready_made_case(READY_MADE, 0.5, about="no PyTorch ready-made Transformer layer (read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "sin_cos_swapped": "sin and cos are swapped: column 2i holds sin(pos · ω_i) and column 2i+1 holds cos(pos · ω_i), "
                       "so PE(0) = [0, 1, 0, 1, …].",
    "exponent_i": "The exponent uses i instead of 2i: the frequency of columns 2i and 2i+1 is "
                  "1 / 10000^(2i / d_model), where 2i is the even column index (0, 2, 4, …), not the pair index "
                  "(0, 1, 2, …).",
    "no_sqrt_scale": "The embeddings are not multiplied by √d_model: multiply what self.embedding returns by "
                     "math.sqrt(self.d_model) (the paper, section 3.4).",
    "concatenated": "The encoding is concatenated to x instead of added: the output must keep d_model features; "
                    "return x + pe[:, :seq].",
    "pe_parameter": "pe is an nn.Parameter, so the optimiser would train it: the sinusoidal table is fixed. Store it "
                    "with self.register_buffer('pe', table) instead.",
    "sin_cos_halves": "The table holds all the sines, then all the cosines ([sin | cos] halves): they interleave, "
                      "sin in the even columns 2i and cos in the odd columns 2i+1 (table[:, 0::2] = sin, "
                      "table[:, 1::2] = cos).",
    "dropout_before_adding": "Dropout is applied to x before the encoding is added: apply it to the sum, "
                             "self.dropout(x + pe[:, :seq]) (the paper drops the sums of embeddings and positional "
                             "encodings).",
    "no_dropout": "Dropout is missing: in training mode the output must be self.dropout(x + pe[:, :seq]).",
}

# Known mistakes recognised by the exception they raise (re.search on the description of the exception):
# the add probe raises on an output with twice the features of its input.
RAISES = {
    "concatenated": r"joined side by side, not summed",
}
