"""A hidden case's message says nothing that learner code produced (issue 17, point 4): unit tests of
verdict.judge_case on chapter 02's real hidden cases, with the failures a hostile learner can make the
child report. Graded end to end by the planted leakers of test_results_hostile.py. Fast: no sandbox.

What reaches a hidden row is decided by who produced the failure (a ``GraderFailure`` this process
observed, or a ``LearnerFailure`` decoded from the child), never by the message's wording.
"""
from __future__ import annotations

import pytest
import torch

from course_admin.grading import plan
from course_admin.grading.verdict import GraderFailure, LearnerFailure, decode, hidden_property, judge_case, syntax_error
from course_lib.provided.layout import LAYOUT

from ..planted_results import MARKER, MIMICS

pytestmark = pytest.mark.skipif(not (LAYOUT.root / "solutions" / "hidden" / "ch02.py").is_file(),
                                reason="the hidden cases ship only with the instructor's repository")


@pytest.fixture(scope="module")
def ch02() -> plan.Chapter:
    return plan.prepare("02")


def hidden(chapter: plan.Chapter) -> list[plan.GradedCase]:
    return [g for g in chapter.cases if g.hidden]


def secrets(chapter: plan.Chapter, g: plan.GradedCase) -> list[str]:
    """What a hidden case's row must never show: the inputs' shapes and first values, in the forms a
    learner's f-string gives them, and the marker of the planted text."""
    query = chapter.inputs[g.index]["query"]
    return [MARKER, str(query.shape), str(list(query.shape)), "_".join(map(str, query.shape)),
            str(query.flatten()[:3].tolist()), str(query.dtype)]


def leaks(chapter: plan.Chapter, g: plan.GradedCase, text: str) -> list[str]:
    return [s for s in secrets(chapter, g) if s in text]


def said(chapter: plan.Chapter, g: plan.GradedCase, prefix: str) -> str:
    """What a hostile learner's exception says on case ``g``: ``prefix`` and the case's inputs."""
    query = chapter.inputs[g.index]["query"]
    shape = "_".join(map(str, query.shape))
    head = prefix.format(d=f"{MARKER}_{shape}", n=query.shape[-1], c=f"Shape_{shape}")
    return f"{head} {MARKER} {query.shape} {query.dtype} {query.flatten()[:3].tolist()}"


@pytest.mark.parametrize("prefix", MIMICS)
def test_learner_text_never_reaches_a_hidden_row(ch02, prefix: str) -> None:
    for g in hidden(ch02):
        row = judge_case(ch02, g, decode({"kind": "exception", "message": said(ch02, g, prefix)}), "bwrap")
        assert row.status == "fail" and not leaks(ch02, g, row.message), row.message
        assert row.message == f"raised an exception (this hidden case checks: {hidden_property(g)})"


def test_a_public_row_still_shows_the_learners_text(ch02) -> None:
    g = next(g for g in ch02.cases if not g.hidden and not g.case.reads_source)
    row = judge_case(ch02, g, LearnerFailure(said(ch02, g, "not implemented yet:")), "bwrap")
    assert MARKER in row.message and str(ch02.inputs[g.index]["query"].shape) in row.message


def test_a_hidden_row_names_the_property_it_checks(ch02) -> None:
    """Its ``about`` (every hidden case has one: test_hidden_about.py, which also covers the fallback to the id)."""
    names = {g.case.name: hidden_property(g) for g in hidden(ch02)}
    assert names["h-float64-heads"] == "float64 end to end, with heads"
    assert names["h-plain-long"] == "no mask, with more keys than queries"
    g = next(g for g in hidden(ch02) if g.case.name == "h-float64-heads")
    row = judge_case(ch02, g, LearnerFailure("anything"), "bwrap")
    assert row.message.endswith("(this hidden case checks: float64 end to end, with heads)")


def test_the_graders_own_failures_pass_through_without_what_the_learner_chose(ch02) -> None:
    g = hidden(ch02)[0]
    crash = GraderFailure("the grading process ended during this case (exit status 32)",
                          "the grading process ended during this case (how: see the public cases)")
    row = judge_case(ch02, g, crash, "bwrap")
    assert row.message.startswith("the grading process ended during this case (how: see the public cases)")
    assert "32" not in row.message
    timeout = GraderFailure("did not finish within the time limit (10 s per chapter); the process was stopped")
    assert judge_case(ch02, g, timeout, "bwrap").message.startswith(str(timeout))


def test_a_known_mistake_named_by_raises_shows_the_specs_text_only(ch02) -> None:
    g = hidden(ch02)[0]
    text = f"raised RuntimeError: value cannot be converted to type at::Half without overflow {MARKER} (3, 9, 32)"
    row = judge_case(ch02, g, LearnerFailure(text), "bwrap")
    assert row.message == ch02.spec.MISTAKES["big_negative_fill"]


def test_a_syntax_error_is_found_by_compiling_the_submitted_bytes(ch02) -> None:
    assert syntax_error("attention.py", b"x = 1\n") is None
    found = syntax_error("attention.py", b"x = 1\ndef broken(:\n    pass\n")
    assert found == "cannot import attention.py: SyntaxError at line 2"
    assert syntax_error("attention.py", b"x = 1\0") in ("cannot import attention.py: SyntaxError",
                                                        "cannot import attention.py: SyntaxError at line 1")
    assert "cannot be read as Python" in syntax_error("attention.py", b"x = " + b"-" * 100_000 + b"1")
    g = hidden(ch02)[0]
    row = judge_case(ch02, g, LearnerFailure(f"cannot import attention.py: SyntaxError at line 99 {MARKER}"), "bwrap",
                     found)
    assert row.message == found


def _outputs(chapter: plan.Chapter, g: plan.GradedCase, change) -> dict:
    out = {k: v.clone() for k, v in chapter.expected[g.index].items()}
    change(out)
    return out


@pytest.mark.parametrize(("change", "says"), [
    (lambda o: o.update(output=o["output"].double()), "wrong dtype (keep the dtype of the inputs)"),
    (lambda o: o.update(output=o["output"][..., :1]), "wrong shape of output"),
    (lambda o: o.update(output=o["output"] + 1), "output: values differ from the reference"),
    (lambda o: o.update(output=o["output"] * float("nan")), "output: NaN or inf values where the reference is finite"),
    (lambda o: o.pop("weights"), "missing result(s): weights"),
    (lambda o: o.update(output=type(f"Shape_3_9_32_{MARKER}", (), {})()), "output: expected a torch.Tensor"),
])
def test_wrong_outputs_say_what_differs_and_nothing_else(ch02, change, says: str) -> None:
    g = hidden(ch02)[0]
    row = judge_case(ch02, g, _outputs(ch02, g, change), "bwrap")
    assert row.status == "fail" and row.message == f"{says} (this hidden case checks: {hidden_property(g)})"
    assert not leaks(ch02, g, row.message)


def test_a_probe_result_that_is_not_a_dict_names_no_type(ch02) -> None:
    g = hidden(ch02)[0]
    actual = decode({"kind": "not_dict", "type": f"Shape_3_9_32_{MARKER}"})
    row = judge_case(ch02, g, actual, "bwrap")
    assert row.message.startswith("the probe's result is not a dict of tensors") and MARKER not in row.message
    assert judge_case(ch02, g, {k: v for k, v in ch02.expected[g.index].items()}, "bwrap").status == "pass"
    assert torch.is_tensor(ch02.expected[g.index]["output"])
