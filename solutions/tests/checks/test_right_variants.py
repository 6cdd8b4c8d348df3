"""Right code keeps full marks (issue 18, "false fails"): every implementation that the book, the hints and the
docstrings present as right earns every case, public and hidden, judged the grader's way.

* chapter 04's sinusoidal table computed in float32 throughout ("float32 is close enough here", its docstring
  says), in chapters 04 and 06 (whose float64 Transformer uses it);
* chapter 02's mask applied after the softmax, the weights then renormalised over the keys left (the page shows
  both ways give the same weights);
* chapter 07's greedy decoding that recomputes everything each step, model(src, ys), instead of encoding once;
* chapter 04's table kept with register_buffer("pe", table, persistent=False): a buffer that follows .to() and is
  never trained, only left out of state_dict (issue 26: the table is built again with every module);
* chapter 07's shift_right built as torch.cat([bos, tgt], 1)[:, :-1], an EOS left where the label is padding,
  which under the causal mask changes no loss or gradient (issue 26);
* the textbook forms of chapters 02 and 05 (scores divided by sqrt(d_k), torch.nn.functional.dropout, a LayerNorm
  with .mean() and a division by sqrt(var + eps)), which the reference replaced by cheaper forms of the same
  formulas (issue 20), in every chapter that uses them, its own code throughout the model.

Each is planted beside a near miss that must lose points, so that the cases can tell.
"""
from __future__ import annotations

import math

import pytest
import torch
from course_admin.measure import bench_encoder
from torch import Tensor

from course_admin.grading.plan import hidden_cases
from course_lib.provided import chapters
from course_lib.provided.checking import judge, run_probe
from course_lib.provided.loader import PatchedImpl

from .test_property_cases import REF, scores


def float32_table(max_len: int, d_model: int) -> Tensor:
    """The docstring's steps, all in float32."""
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]                 # (max_len, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)                                           # (max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def float16_table(max_len: int, d_model: int) -> Tensor:
    """A near miss: the table rounded to float16 (3 digits)."""
    return float32_table(max_len, d_model).half().float()


class Float32Encoding(REF.positional.PositionalEncoding):
    table = staticmethod(float32_table)

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__(d_model, dropout, max_len)
        self.pe = self.table(max_len, d_model).unsqueeze(0)                        # (1, max_len, d_model)


class Float16Encoding(Float32Encoding):
    table = staticmethod(float16_table)


def renormalised_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                           dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Softmax first, then the masked weights zeroed and each row divided by what is left (at least tiny)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))             # (..., seq_q, seq_k)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
        weights = weights / weights.sum(-1, keepdim=True).clamp(min=torch.finfo(weights.dtype).tiny)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    return weights @ value, weights


def unrenormalised_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                             dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """A near miss: masked after the softmax, not renormalised (the rows no longer sum to 1)."""
    weights = torch.softmax(query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)), dim=-1)
    weights = weights if mask is None else weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    return weights @ value, weights


@torch.no_grad()
def recomputing_decode(model, src: Tensor, max_len: int, bos_id: int, eos_id: int, pad_id: int) -> Tensor:
    """Each step runs the whole model on (src, prefix): encodes again, decodes the prefix, takes the last logits."""
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)                     # (batch, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len):
        step = model(src, ys)[:, -1].argmax(-1).masked_fill(done, pad_id)          # (batch,)
        ys, done = torch.cat([ys, step[:, None]], dim=1), done | (step == eos_id)
        if bool(done.all()):
            break
    return ys[:, 1:]


@torch.no_grad()
def decode_without_padding(model, src: Tensor, max_len: int, bos_id: int, eos_id: int, pad_id: int) -> Tensor:
    """A near miss: stops when all are done but leaves what a finished sequence generates after its EOS."""
    out = recomputing_decode(model, src, max_len, bos_id, eos_id, pad_id)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    for _ in range(out.size(1)):
        ys = torch.cat([ys, model(src, ys)[:, -1].argmax(-1)[:, None]], dim=1)
    return ys[:, 1:]


class Float32Transformer(REF.transformer.Transformer):
    """The reference's Transformer on a float32 table (its own module imported the reference's encoding)."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.positional = Float32Encoding(config.d_model, config.dropout, config.max_len)


class Float32InsideTransformer(REF.transformer.Transformer):
    """A near miss: float64 logits computed by a float32 copy of the model."""

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        dtype = self.generator.weight.dtype
        return REF.transformer.Transformer.forward(self.float(), src, tgt).to(dtype) if dtype != torch.float32 \
            else super().forward(src, tgt)


class UnsavedTableEncoding(REF.positional.PositionalEncoding):
    """The table as a non-persistent buffer: not in state_dict, still moved by .to() and never trained."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__(d_model, dropout, max_len)
        table = self.pe
        del self.pe
        self.register_buffer("pe", table, persistent=False)


class PlainAttributeEncoding(REF.positional.PositionalEncoding):
    """A near miss: the table a plain attribute, no buffer, so .to() leaves it where it was."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__(d_model, dropout, max_len)
        table = self.pe
        del self.pe
        self.pe = table


def cat_shift(tgt: Tensor, bos_id: int, pad_id: int) -> Tensor:
    """BOS, then the whole target, its last position cut: the EOS of a padded row stays (its label is padding)."""
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], dim=1)[:, :-1]   # (batch, seq)


def early_padded_shift(tgt: Tensor, bos_id: int, pad_id: int) -> Tensor:
    """A near miss: padded one position early, so the input of each row's last real label is padding."""
    shifted = torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], dim=1)  # (batch, seq)
    last = torch.cat([tgt[:, 1:] == pad_id, torch.ones_like(tgt[:, :1], dtype=torch.bool)], dim=1)
    return shifted.masked_fill(last, pad_id)


TABLE = {"positional.sinusoidal_table": float32_table, "positional.PositionalEncoding": Float32Encoding}
RIGHT = [("04", TABLE), ("06", {**TABLE, "transformer.Transformer": Float32Transformer}), ("02", {"attention.scaled_dot_product_attention": renormalised_attention}),
         ("07", {"seq2seq.greedy_decode": recomputing_decode}),
         ("04", {"positional.PositionalEncoding": UnsavedTableEncoding}), ("07", {"seq2seq.shift_right": cat_shift})]
NEAR_MISSES = [("04", {"positional.sinusoidal_table": float16_table, "positional.PositionalEncoding": Float16Encoding}),
               ("06", {"transformer.Transformer": Float32InsideTransformer}),
               ("02", {"attention.scaled_dot_product_attention": unrenormalised_attention}),
               ("07", {"seq2seq.greedy_decode": decode_without_padding}),
               ("04", {"positional.PositionalEncoding": PlainAttributeEncoding}),
               ("07", {"seq2seq.shift_right": early_padded_shift})]


@pytest.mark.parametrize("chapter,overrides", RIGHT, ids=[f"ch{c}-{next(iter(o.values())).__name__}" for c, o in RIGHT])
def test_a_right_variant_keeps_full_marks(chapter: str, overrides: dict) -> None:
    got = scores(chapter, PatchedImpl(REF, overrides, label="right variant"), lambda case: True)
    full = scores(chapter, REF, lambda case: True)
    assert got == full, {name: v for name, v in got.items() if v != full[name]}


@pytest.mark.parametrize("chapter,overrides", NEAR_MISSES,
                         ids=[f"ch{c}-{next(iter(o.values())).__name__}" for c, o in NEAR_MISSES])
def test_a_near_miss_loses_points(chapter: str, overrides: dict) -> None:
    got = scores(chapter, PatchedImpl(REF, overrides, label="near miss"), lambda case: True)
    assert sum(got.values()) < sum(scores(chapter, REF, lambda case: True).values())


def textbook_forms():
    """The bench's ``--textbook`` functions (solutions/scripts/bench_encoder.py): one definition of the old forms."""
    bench = bench_encoder
    return bench.textbook_attention, bench.textbook_layer_norm


@pytest.mark.parametrize("chapter", ["02", "03", "05", "06", "08"])
def test_the_textbook_forms_keep_full_marks_throughout_the_model(chapter: str, monkeypatch) -> None:
    """Every use inside the model is patched (MultiHeadAttention's call, every LayerNorm of encoder and decoder),
    unlike PatchedImpl, which replaces what the spec calls by name; expected values come from the reference."""
    attention, layer_norm = textbook_forms()
    spec = chapters.load_spec(chapter)
    got = {}
    for case in [*spec.CASES, *hidden_cases(chapter)]:
        if case.reads_source:
            continue
        torch.manual_seed(0)
        inputs = case.make_inputs(case.seed)
        expected = run_probe(spec.PROBES, case, REF, inputs)
        with monkeypatch.context() as patch:
            patch.setattr(REF.attention, "scaled_dot_product_attention", attention)
            patch.setattr(REF.multihead, "scaled_dot_product_attention", attention)
            patch.setattr(REF.encoder.LayerNorm, "forward", layer_norm)
            actual = run_probe(spec.PROBES, case, REF, inputs)
        got[case.name] = judge(chapter, case, actual, inputs, expected, {}, spec.MISTAKES).earned
    full = scores(chapter, REF, lambda case: True)
    assert got == full, {name: v for name, v in got.items() if v != full[name]}
