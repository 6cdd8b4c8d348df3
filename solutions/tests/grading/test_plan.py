"""The store of prepared chapters (plan.use_store): a grading run computes each chapter's expected and
known-wrong outputs once, and every later run and worker loads them, unless anything they come from changed."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from course_admin.grading import plan


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(plan, "_PREPARED", {})
    plan.use_store(tmp_path / ".prepared")
    calls: list[str] = []
    compute = plan._compute

    def counted(number, graded):
        calls.append(number)
        return compute(number, graded)

    monkeypatch.setattr(plan, "_compute", counted)
    yield tmp_path / ".prepared", calls
    plan.use_store(None)


def again(number: str) -> plan.Chapter:
    plan._PREPARED.clear()  # as a new process would: nothing in memory
    return plan.prepare(number)


def assert_same(a: plan.Chapter, b: plan.Chapter) -> None:
    assert len(a.expected) == len(b.expected)
    for x, y in zip(a.expected, b.expected):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    for x, y in zip(a.mistakes, b.mistakes):
        assert x.keys() == y.keys()


def test_a_prepared_chapter_is_stored_once_and_then_loaded(store):
    folder, calls = store
    first = again("02")
    assert calls == ["02"] and [p.name for p in folder.glob("ch02-*.pt")] == [
        f"ch02-{plan.chapter_fingerprint('02')}.pt"]
    second = again("02")
    assert calls == ["02"], "the second run computed again instead of loading the store"
    assert_same(first, second)


def test_a_change_to_what_it_was_computed_from_computes_again_and_drops_the_old_file(store, monkeypatch, tmp_path):
    folder, calls = store
    again("01")
    before = plan.chapter_fingerprint("01")
    changed = tmp_path / "variants_edited.py"
    changed.write_text("# an edited variant\n")
    monkeypatch.setattr(plan, "_ENGINE", [*plan._ENGINE, changed])
    assert plan.chapter_fingerprint("01") != before
    again("01")
    assert calls == ["01", "01"]
    assert [p.name for p in folder.glob("ch01-*.pt")] == [f"ch01-{plan.chapter_fingerprint('01')}.pt"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "too few cases"])
def test_a_damaged_store_file_is_computed_again_never_trusted(store, damage):
    folder, calls = store
    first = again("01")
    path = next(folder.glob("ch01-*.pt"))
    if damage == "garbage":
        path.write_bytes(b"not a torch file")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    else:
        values = torch.load(path, weights_only=True)
        torch.save({k: v[:-1] for k, v in values.items()}, path)
    assert_same(first, again("01"))
    assert calls == ["01", "01"]
    assert len(torch.load(path, weights_only=True)["expected"]) == len(first.cases)  # repaired

