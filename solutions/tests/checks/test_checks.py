"""Tests of the tests: the checks reward the reference, give 0 to the stub, and name every known mistake.

Known-wrong variants live in solutions/mistakes/chNN.py; each must lose points on at least one public
case and be named there by its own message (MISTAKES in the chapter's spec), from its outputs or, for
one that raises, from what it raises (RAISES). A chapter's ready-made case ("built from scratch") is a
static scan of the learner's source: a learner calling PyTorch's own attention loses exactly that case.
"""
from __future__ import annotations

import re

import pytest
import torch

from course_lib.provided import chapters
from course_lib.provided.checking import CheckFailure, judge, ready_made_uses, total
from course_lib.provided.layout import LAYOUT, REPO_ROOT
from course_lib.provided.loader import Impl, load_impl

from course_admin.grading import plan
from course_admin.grading.source_scan import with_source_scans
from course_admin.intake.submissions import Reader
from course_admin.records.rows import GradeRow
from course_admin.release import refs
from course_admin.release.variants import wrong_impls

from .. import course_cli
from ..planted import FUSED

CHAPTERS = chapters.available()
MISTAKES = [(ch, name) for ch in CHAPTERS for name in chapters.load_spec(ch).MISTAKES]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_reference_scores_full_marks(chapter: str) -> None:
    results = chapters.run_chapter(chapter, load_impl("reference"))
    earned, possible = total(results)
    assert possible > 0 and earned == possible, [r.message for r in results if r.status != "pass"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_stub_scores_zero_and_says_not_implemented(chapter: str) -> None:
    results = chapters.run_chapter(chapter, load_impl("learner"))
    assert total(results)[0] == 0, [r.case for r in results if r.status == "pass"]
    assert all("not implemented yet" in r.message for r in results)


@pytest.mark.parametrize("chapter,mistake", MISTAKES)
def test_known_mistake_loses_points_with_its_own_message(chapter: str, mistake: str) -> None:
    impl = wrong_impls(chapter)[mistake]
    results = chapters.run_chapter(chapter, impl)
    earned, possible = total(results)
    assert earned < possible, f"{mistake} scores full marks"
    named = [r for r in results if mistake in r.mistakes]
    assert named, f"{mistake} is never named; messages: {[r.message for r in results]}"
    assert chapters.load_spec(chapter).MISTAKES[mistake] in named[0].message


@pytest.mark.slow  # every known-wrong variant of a chapter run again: seconds a chapter
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_diagnosis_is_given_only_with_its_evidence(chapter: str) -> None:
    """Issue 18: no message claims a mistake its own evidence does not show. A known-wrong variant's results may
    name other mistakes only beside its own (an "Or:" between mistakes that give the same outputs there)."""
    wrong = {}
    for mistake, impl in wrong_impls(chapter).items():
        for r in chapters.run_chapter(chapter, impl):
            if r.mistakes and mistake not in r.mistakes:
                wrong[(mistake, r.case)] = r.mistakes
    assert not wrong, wrong


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_declared_mistake_has_a_variant(chapter: str) -> None:
    assert set(chapters.load_spec(chapter).MISTAKES) == set(wrong_impls(chapter))


@pytest.mark.slow  # every known-wrong variant of a chapter run again: seconds a chapter
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_reference_outputs_match_a_fresh_regeneration(chapter: str) -> None:
    committed = chapters.load_reference_outputs(chapter)
    fresh = refs.build(chapter)
    assert sorted(committed) == sorted(fresh), "cases were added or removed: run `course refs`"
    for case, saved in fresh.items():
        for part in ("inputs", "expected"):
            assert committed[case][part].keys() == saved[part].keys()
            for key, value in saved[part].items():
                torch.testing.assert_close(committed[case][part][key], value, rtol=1e-5, atol=1e-6,
                                           equal_nan=True, msg=lambda m: f"{case}/{part}/{key}: {m}; run `course refs`")
        assert sorted(committed[case]["mistakes"]) == sorted(saved["mistakes"])


@pytest.mark.slow  # `course check` in processes of its own
def test_course_check_cli_exit_code_and_json() -> None:
    ok = course_cli.run(["check", "ch02", "--impl", "reference", "--json"],
                        capture_output=True, text=True, cwd=REPO_ROOT)
    assert ok.returncode == 0, ok.stderr
    assert '"earned": 16.0' in ok.stdout
    stub = course_cli.run(["check", "ch02"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert stub.returncode == 1 and "not implemented yet" in stub.stdout and re.search(r"\b0 ?/ ?16\b", stub.stdout)


@pytest.mark.slow  # `course check` in processes of its own
def test_course_check_rejects_an_unknown_chapter() -> None:
    bad = course_cli.run(["check", "ch99"],
                         capture_output=True, text=True, cwd=REPO_ROOT)
    assert bad.returncode == 2 and "chapter 99 has no checks yet" in bad.stderr


# ------------------------------------------------------------------ mistakes recognised by what they raise
HALF_OVERFLOW = "value cannot be converted to type c10::Half without overflow"


@pytest.mark.parametrize("actual", [RuntimeError(HALF_OVERFLOW),                       # course check: the exception
                                    CheckFailure(f"raised RuntimeError: {HALF_OVERFLOW} (at attention.py:9: x)")])
def test_an_exception_matching_raises_names_its_mistake(actual: BaseException) -> None:
    """The grader's parent sees the child's description (a CheckFailure); course check the exception itself."""
    spec = chapters.load_spec("02")
    case = next(c for c in spec.CASES if c.name == "float16 with a mask")
    saved = chapters.load_reference_outputs("02")[case.name]
    result = judge("02", case, actual, saved["inputs"], saved["expected"], saved["mistakes"], spec.MISTAKES, spec.RAISES)
    assert result.status == "fail" and result.mistakes == ["big_negative_fill"]
    assert spec.MISTAKES["big_negative_fill"] in result.message and "torch.finfo(scores.dtype).min" in result.message
    other = judge("02", case, RuntimeError("shapes cannot be multiplied"), saved["inputs"], saved["expected"],
                  saved["mistakes"], spec.MISTAKES, spec.RAISES)
    assert other.mistakes == [] and other.message.startswith("raised RuntimeError")


SEQ_MISMATCH = "raised RuntimeError: The size of tensor a (5) must match the size of tensor b (7) at non-singleton dimension 1"


@pytest.mark.parametrize("where,named", [(" (at decoder.py:71: x = self.norm2(x + self.dropout(...)))", True),
                                         ("", True), (" (at encoder.py:120: x = x + self.dropout(...))", False)])
def test_cross_attention_queries_from_memory_are_named_by_their_crash(where: str, named: bool) -> None:
    """Chapter 06: queries taken from memory give src_seq rows, which the residual in decoder.py cannot add to
    x's tgt_seq rows; the same mismatch raised in another of the learner's files is another mistake."""
    if "06" not in CHAPTERS:
        pytest.skip("chapter 06 is not built")
    spec = chapters.load_spec("06")
    case = next(c for c in spec.CASES if c.name.startswith("decoder layer, Post-LN, causal mask"))
    saved = chapters.load_reference_outputs("06")[case.name]
    result = judge("06", case, CheckFailure(SEQ_MISMATCH + where), saved["inputs"], saved["expected"],
                   saved["mistakes"], spec.MISTAKES, spec.RAISES)
    assert result.status == "fail" and result.mistakes == (["cross_attn_q_from_encoder"] if named else [])
    assert (spec.MISTAKES["cross_attn_q_from_encoder"] in result.message) == named
    assert named or result.message.endswith(spec.CROSS_HINT)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_raises_names_declared_mistakes(chapter: str) -> None:
    spec = chapters.load_spec(chapter)
    assert set(getattr(spec, "RAISES", {})) <= set(spec.MISTAKES)


# ------------------------------------------------------------------ ready-made cases: a scan of the source
PATTERNS = chapters.load_spec("02").READY_MADE["attention.py"]
USES = {
    "import torch.nn.functional as F\nF.scaled_dot_product_attention(q, k, v)\n": "torch.nn.functional.scaled_dot_product_attention",
    "import torch\ntorch.nn.functional.scaled_dot_product_attention(q, k, v)\n": "torch.nn.functional.scaled_dot_product_attention",
    "from torch.nn.functional import scaled_dot_product_attention as sdpa\n": "torch.nn.functional.scaled_dot_product_attention",
    "from torch import nn\nlayer = nn.MultiheadAttention(8, 2)\n": "torch.nn.MultiheadAttention",
    "import torch.nn as nn\nnn.TransformerEncoderLayer(8, 2)\n": "torch.nn.TransformerEncoderLayer",
    "import torch\nf = torch.nn.functional\ng = f\ng.scaled_dot_product_attention(q, k, v)\n": "torch.nn.functional.scaled_dot_product_attention",
    "import torch.nn.functional as F\ngetattr(F, 'scaled_dot_product_attention')\n": "torch.nn.functional.scaled_dot_product_attention",
    "import torch\ntorch.ops.aten._scaled_dot_product_flash_attention(q, k, v)\n": "torch.ops.aten._scaled_dot_product_flash_attention",
    "def f():\n    from torch.nn.attention.flex_attention import flex_attention\n": "torch.nn.attention.flex_attention",
}
CLEAN = [
    (LAYOUT.reference / "attention.py").read_text(encoding="utf-8"),  # names F.sdpa in its docstring only
    "# F.scaled_dot_product_attention would be cheating\nimport torch\ntorch.softmax(x, -1)\n",
    "from .attention import scaled_dot_product_attention\nscaled_dot_product_attention(q, k, v)\n",
    "import course_lib.attention as mine\nmine.scaled_dot_product_attention(q, k, v)\n",
]


@pytest.mark.parametrize("source,name", list(USES.items()))
def test_scan_finds_a_ready_made_layer(source: str, name: str) -> None:
    assert [u.split(" (line")[0] for u in ready_made_uses(source, PATTERNS)] == [name]


@pytest.mark.parametrize("source", CLEAN)
def test_scan_passes_code_built_from_scratch(source: str) -> None:
    assert ready_made_uses(source, PATTERNS) == []


def _fused_package(root) -> str:
    """A learner package whose values are right but whose output comes from PyTorch's fused attention."""
    reference = (LAYOUT.reference / "attention.py").read_text(encoding="utf-8")
    mix = next(line for line in reference.splitlines() if line.strip().startswith("output ="))
    fused = mix.split("output =")[0] + FUSED
    (root / "fused_learner").mkdir()
    (root / "fused_learner" / "__init__.py").write_text("")
    (root / "fused_learner" / "attention.py").write_text(reference.replace(mix, fused, 1))
    return "fused_learner"


def test_ready_made_attention_loses_exactly_built_from_scratch(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    results = chapters.run_chapter("02", Impl(_fused_package(tmp_path), "fused"))
    failed = [r for r in results if r.status != "pass"]
    assert [r.case for r in failed] == ["built from scratch"], [r.message for r in failed]
    assert "ready-made torch.nn.functional.scaled_dot_product_attention (line " in failed[0].message
    assert total(results)[0] == total(results)[1] - failed[0].points
    only = chapters.run_chapter("02", Impl("fused_learner", "fused"), cases=["built from scratch"])
    assert [r.status for r in only] == ["fail"]


def test_grader_scans_the_submitted_bytes(tmp_path) -> None:
    """The parent's scan reads the submission, whatever the sandbox's rows say; a clean file passes once another case does."""
    chapter = plan.prepare("02")
    _fused_package(tmp_path)
    (tmp_path / "fused_learner").rename(tmp_path / "course_lib")
    rows = [GradeRow("02", "course_lib", g.label, g.case.points, g.case.points, "pass", "", "bwrap") for g in chapter.cases]
    scanned = {r.component: r for r in with_source_scans(Reader(tmp_path), chapter, rows)}
    assert scanned["built from scratch"].status == "fail" and scanned["built from scratch"].isolation == "none"
    assert "scaled_dot_product_attention" in scanned["built from scratch"].message
    (tmp_path / "course_lib" / "attention.py").write_text((LAYOUT.reference / "attention.py").read_text())
    scanned = {r.component: r for r in with_source_scans(Reader(tmp_path), chapter, rows)}
    assert scanned["built from scratch"].status == "pass"
    failing = [GradeRow("02", "course_lib", g.label, 0.0, g.case.points, "fail", "wrong", "bwrap") for g in chapter.cases]
    scanned = {r.component: r for r in with_source_scans(Reader(tmp_path), chapter, failing)}
    assert scanned["built from scratch"].status == "fail" and "no other check" in scanned["built from scratch"].message


def test_an_unnamed_crash_on_a_mask_case_gets_the_cases_hint() -> None:
    """Chapter 03: a MultiHeadAttention that adds an axis to the mask (mask[:, None]) crashes in its mask
    cases; no RAISES pattern can name every such crash, so the case's hint_if_raises says what to check."""
    if "03" not in CHAPTERS:
        pytest.skip("chapter 03 is not built")
    from course_lib.provided.loader import PatchedImpl
    from course_ref import multihead

    class UnsqueezesTheMask(multihead.MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, None if mask is None else mask[:, None])

    impl = PatchedImpl(load_impl("reference"), {"multihead.MultiHeadAttention": UnsqueezesTheMask})
    results = {r.case: r for r in chapters.run_chapter("03", impl)}
    hint = chapters.load_spec("03").MASK_HINT
    masked = [name for name in results if "mask (" in name]
    assert masked, sorted(results)
    for name in masked:
        assert results[name].status == "fail" and "raised" in results[name].message, results[name]
        assert results[name].message.endswith(hint), results[name].message
    assert results["self-attention values"].status == "pass"  # no mask: nothing breaks, no hint


# ------------------------------------------------------------------ chapter 06: the future-leak hint needs a leak
def _transformer(**change: bool) -> type:
    """The reference's Transformer with one change: no positional encoding in decode, no source mask to the
    encoder, pad id 0 hard-coded, or a target mask without its causal part (a real leak)."""
    from course_ref import masks, transformer

    class Changed(transformer.Transformer):
        def encode(self, src, src_mask=None):
            return super().encode(src, None if change.get("no_src_mask") else src_mask)

        def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
            if not change.get("no_pe_in_decode"):
                return super().decode(tgt, memory, src_mask, tgt_mask)
            return self.decoder(self.tgt_embed(tgt), memory, tgt_mask=tgt_mask, memory_mask=src_mask)

        def forward(self, src, tgt):
            pad = 0 if change.get("pad_0") else self.config.pad_id
            tgt_mask = masks.padding_mask(tgt, pad) if change.get("leak") else masks.target_mask(tgt, pad)
            src_mask = masks.padding_mask(src, pad)
            return self.generator(self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask))
    return Changed


@pytest.mark.parametrize("change,leaks", [("no_pe_in_decode", False), ("no_src_mask", False), ("pad_0", False),
                                          ("leak", True)])
def test_the_future_leak_hint_only_for_a_leak(change: str, leaks: bool) -> None:
    """Issue 18: "Changing a later target token changed earlier outputs" was printed for bugs without a leak."""
    from course_lib.provided.loader import PatchedImpl

    impl = PatchedImpl(load_impl("reference"), {"transformer.Transformer": _transformer(**{change: True})})
    (result,) = chapters.run_chapter("06", impl, cases=["no future leak"])
    assert result.status == "fail", result
    said = "Changing a later target token changed earlier outputs" in result.message or "future leak" in result.message
    assert said == leaks, result.message


# ------------------------------------------------------------------ what a failure is called
def _raised(fn) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("did not raise")


def test_pytorch_not_implemented_is_not_a_stub() -> None:
    """Issue 18: torch's NotImplementedError (bitwise_and on a float mask) is not "not implemented yet"."""
    from course_lib.provided.checking import _describe_exception

    def stub() -> None:
        raise NotImplementedError("Chapter 02: implement scaled_dot_product_attention")

    assert _describe_exception(_raised(stub)).startswith("not implemented yet: Chapter 02")
    torch_raised = _describe_exception(_raised(lambda: torch.ones(2, dtype=torch.bool) & torch.ones(2)))
    assert torch_raised.startswith("raised NotImplementedError") and "bitwise_and" in torch_raised, torch_raised
    no_forward = _describe_exception(_raised(lambda: torch.nn.Module()(torch.ones(1))))
    assert no_forward.startswith("raised NotImplementedError") and "forward" in no_forward, no_forward


def test_a_float32_rounding_difference_says_so() -> None:
    """Issue 18: "got -0.255, expected -0.255" becomes the level of the difference and its likely cause."""
    from course_lib.provided.checking import compare_one

    expected = torch.linspace(-1, 1, 7, dtype=torch.float64)
    rounded = expected.float().double() + 3e-7 * torch.tensor([0, 1, 0, 0, 0, 0, 0.0], dtype=torch.float64)
    message = compare_one("logits", rounded, expected, rtol=1e-7, atol=1e-9)
    assert "1e-07 level" in message and "computed in float32, or a different order of operations?" in message, message
    got, want = message.split("got ")[1].split(", expected ")
    assert got != want.split(")")[0], message  # enough digits to tell them apart
    wrong = compare_one("logits", expected + 0.1, expected, rtol=1e-7, atol=1e-9)
    assert "level" not in wrong and "largest difference 0.1" in wrong, wrong


def test_key_T_is_named_on_every_check_it_breaks(tmp_path, monkeypatch) -> None:
    """Issue 18: key.T was named on one case of fifteen; its crashes quote the line (at attention.py:N: ...key.T...)."""
    reference = (LAYOUT.reference / "attention.py").read_text(encoding="utf-8")
    assert "key.transpose(-2, -1)" in reference
    (tmp_path / "course_lib_dot_t").mkdir()
    (tmp_path / "course_lib_dot_t" / "__init__.py").write_text("")
    (tmp_path / "course_lib_dot_t" / "attention.py").write_text(reference.replace("key.transpose(-2, -1)", "key.T"))
    monkeypatch.syspath_prepend(str(tmp_path))
    failed = [r for r in chapters.run_chapter("02", Impl("course_lib_dot_t", "key.T")) if r.status != "pass"
              and r.case != "built from scratch"]
    assert len(failed) >= 10 and all(r.mistakes == ["dot_T"] for r in failed), [(r.case, r.message) for r in failed]
