"""Messages that blame the right thing in `course check` (issue 26, section 4), on planted learners.

Each learner is the reference with one or two planted changes, as a package of its own. For each, what the old
messages said is shown from the per-case evidence alone (``judge`` on one case, the chapter-wide note), then what
`course check` says now (``check.results_and_causes``, what ``course check chNN --json`` prints):

1. "fix chapter 02 first" only on the cases whose computation runs chapter 02's code (traced on the learner's
   code): -1e9 for the mask fill in attention.py and an unbiased variance in LayerNorm;
2. no named mistake the passed cases rule out: MultiHeadAttention with dropout also on its output;
3. one mistake, one diagnosis: LayerNorm with the unbiased std and eps outside the root fails cases with
   "values differ" alone, which now say which named case explains them.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course_lib.provided import chapters, diagnosis
from course_lib.provided.check import results_and_causes
from course_lib.provided.checking import judge, run_probe
from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import Impl

CENTRED_VAR = "var = (centred * centred).sum(dim=-1, keepdim=True) / d_model"
UNBIASED = (CENTRED_VAR, CENTRED_VAR.replace("/ d_model", "/ (d_model - 1)"))
STD_EPS_OUTSIDE = ("x_hat = centred * torch.rsqrt(var + self.eps)", "x_hat = centred / (torch.sqrt(var) + self.eps)")
FILL_1E9 = ("scores.masked_fill(~mask, torch.finfo(scores.dtype).min)", "scores.masked_fill(~mask, -1e9)")
OUTPUT_DROPOUT = ("return self.w_o(merge_heads(heads))",
                  "return nn.functional.dropout(self.w_o(merge_heads(heads)), self.dropout, self.training)")
EVAL_EXCLUDED = {"reshape_no_transpose", "interleaved_heads", "merge_no_transpose", "no_output_projection",
                 "mask_not_over_heads", "shared_projection"}  # the six the issue found on the training case
TRAINING_03 = "dropout on the attention weights, training mode only"
NOTE_02 = "uses your chapter 02 (attention.py)"


def planted_files(dest: Path, changes: dict[str, list[tuple[str, str]]]) -> Path:
    """The reference's modules copied into ``dest``, with each (old, new) of ``changes[module]`` replaced once."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in LAYOUT.reference.glob("*.py"):
        shutil.copy2(path, dest / path.name)
    for module, edits in changes.items():
        text = (dest / module).read_text(encoding="utf-8")
        for old, new in edits:
            assert text.count(old) == 1, (module, old)  # the reference changed: the planted edit must follow it
            text = text.replace(old, new)
        (dest / module).write_text(text, encoding="utf-8")
    return dest


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """planted(name, changes) -> an Impl of the reference with ``changes`` as a package of its own."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(name: str, changes: dict[str, list[tuple[str, str]]]) -> Impl:
        planted_files(tmp_path / name, changes)
        return Impl(name, name)
    return make


def alone(number: str, impl: Impl, case_name: str):
    """The case judged on its own evidence (``judge``), as the old messages were: no other case looked at."""
    spec = chapters.load_spec(number)
    case = next(c for c in spec.CASES if c.name == case_name)
    saved = chapters.load_reference_outputs(number)[case.name]
    actual = run_probe(spec.PROBES, case, impl, saved["inputs"])
    return judge(number, case, actual, saved["inputs"], saved["expected"], saved["mistakes"], spec.MISTAKES,
                 getattr(spec, "RAISES", None))


def by_case(results) -> dict:
    return {r.case: r for r in results}


def test_the_chapter_02_note_heads_only_the_cases_that_run_chapter_02(planted) -> None:
    impl = planted("blame_fill_var", {"attention.py": [FILL_1E9], "encoder.py": [UNBIASED]})
    results, failing, note = results_and_causes("05", impl)
    assert "02" in failing and NOTE_02 in note  # the old code headed every failed case of 05 with this note
    got = by_case(results)
    norm = got["LayerNorm values (batch, seq, d_model)"]
    assert norm.status == "fail" and "unbiased_variance" in norm.mistakes
    assert "chapter 02" not in norm.message, norm.message
    layer = got["encoder layer, Post-LN"]
    assert layer.status == "fail" and layer.message.startswith(f"Chapter 05 {NOTE_02}"), layer.message
    for name in ("LayerNorm on (tokens, d_model), far from 0", "LayerNorm eps inside the square root"):
        assert got[name].status == "fail" and "chapter 02" not in got[name].message, got[name]


def test_what_a_probe_runs_is_traced_on_the_learners_own_files(planted) -> None:
    impl = planted("blame_traced", {})
    owner = diagnosis.module_owners(chapters._package_folders(impl)[0])
    spec = chapters.load_spec("05")
    saved = chapters.load_reference_outputs("05")
    ran = {}
    for case in spec.CASES[:6]:
        getattr(impl, "encoder")  # imported before: an import is not a run  # noqa: B009
        _, ran[case.name] = diagnosis.traced(lambda: run_probe(spec.PROBES, case, impl, saved[case.name]["inputs"]),
                                             owner)
    assert ran["LayerNorm values (batch, seq, d_model)"] == {"05"}
    assert ran["feed-forward values"] == {"05"}
    assert ran["encoder layer, Post-LN"] == {"02", "03", "05"}


def test_no_mistake_the_passed_cases_rule_out_is_named(planted) -> None:
    impl = planted("blame_output_dropout", {"multihead.py": [OUTPUT_DROPOUT]})
    old = alone("03", impl, TRAINING_03)
    assert old.status == "fail" and EVAL_EXCLUDED <= set(old.mistakes), old.mistakes  # the old message: six names
    results, _, _ = results_and_causes("03", impl)
    got = by_case(results)
    training = got[TRAINING_03]
    assert training.status == "fail" and not set(training.mistakes) & EVAL_EXCLUDED, training.mistakes
    texts = chapters.load_spec("03").MISTAKES
    assert not [n for n in EVAL_EXCLUDED if texts[n] in training.message], training.message
    assert "attn_weights" in training.message  # what differs is still said
    assert all(r.status == "pass" for name, r in got.items() if name != TRAINING_03)  # the evidence that rules out


def test_one_mistake_is_named_once_and_explains_the_others(planted) -> None:
    impl = planted("blame_std_eps", {"encoder.py": [UNBIASED, STD_EPS_OUTSIDE]})
    eps_case = "LayerNorm eps inside the square root"
    old = alone("05", impl, eps_case)
    assert old.status == "fail" and not old.mistakes and old.message.startswith("output: values differ"), old
    results, _, _ = results_and_causes("05", impl)
    failed = [r for r in results if r.status != "pass"]
    named = [r for r in failed if r.mistakes]
    assert named and all(r.mistakes == ["unbiased_variance"] for r in named), [r.mistakes for r in named]
    first = named[0].case
    assert first == "LayerNorm values (batch, seq, d_model)"
    unnamed = [r for r in failed if not r.mistakes]
    assert len(unnamed) >= 3, [r.case for r in unnamed]  # eps, the final-norm stack, float64: "values differ" before
    for r in unnamed:
        assert r.message.startswith(f"Explained by the mistake named in '{first}': fix that first. [output: values"), r
    assert by_case(results)[eps_case] in unnamed


def test_an_exception_is_never_explained_away() -> None:
    """A case that raises says what it raised, whatever mistake another case names."""
    report = [diagnosis.Judged("a", False, ("m",), True, frozenset({"m"})),
              diagnosis.Judged("b", False, (), False, frozenset({"m"})),
              diagnosis.Judged("c", False, (), True, frozenset({"m"})),
              diagnosis.Judged("d", False, (), True, frozenset({"other"})),
              diagnosis.Judged("e", True, (), True, frozenset({"n"}))]
    assert diagnosis.explainers(report) == {2: 0}
    assert diagnosis.ruled_out(report) == {"n"}
    assert diagnosis.explained("output: values differ", "a") == (
        "Explained by the mistake named in 'a': fix that first. [output: values differ]")


def test_masked_mean_cases_are_not_blamed_on_chapter_05(planted) -> None:
    """Chapter 08: masked_mean runs chapter 08's code alone; the classifier's logits run chapter 05's encoder."""
    full_length = ("count = keep.sum(dim=1).clamp(min=1).to(x.dtype)",
                   "count = (keep.sum(dim=1) * 0 + x.size(1)).to(x.dtype)")  # divides by seq, padding or not
    impl = planted("blame_pool_var", {"classifier.py": [full_length], "encoder.py": [UNBIASED]})
    results, failing, note = results_and_causes("08", impl)
    assert "05" in failing and "your chapter 05" in note  # the old code headed every failed case of 08 with it
    pooled = [r for r in results if r.case.startswith("masked_mean") and r.status != "pass"]
    assert pooled and all("chapter 05" not in r.message for r in pooled), [r.message for r in pooled]
    assert "mean_over_full_length" in pooled[0].mistakes, pooled[0].message
    logits = [r for r in results if r.case.startswith("logits") and r.status != "pass"]
    assert logits and all("your chapter 05 (encoder.py)" in r.message for r in logits), [r.message for r in logits]
