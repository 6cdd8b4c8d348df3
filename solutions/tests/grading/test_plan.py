"""The store of prepared chapters (plan.use_store): a grading run computes each chapter's expected and
known-wrong outputs once, and every later run and worker loads them, unless anything they come from changed."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from course_admin.grading import plan


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plan.SHARED, raising=False)  # the suite's shared folder (solutions/tests/conftest.py): not here
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



def test_runs_into_other_folders_share_what_one_computed_through_course_grade_cache(store, monkeypatch, tmp_path):
    folder, calls = store
    shared = tmp_path / "shared"
    monkeypatch.setenv(plan.SHARED, str(shared))
    first = again("02")
    assert calls == ["02"] and (shared.stat().st_mode & 0o777) == 0o700
    assert [p.name for p in shared.glob("ch02-*.pt")] == [f"ch02-{plan.chapter_fingerprint('02')}.pt"]
    plan.use_store(tmp_path / "another_out" / ".prepared")         # another run, another --out
    assert_same(first, again("02"))
    assert calls == ["02"], "a run into another folder computed again instead of loading the shared folder"
    assert (tmp_path / "another_out" / ".prepared" / f"ch02-{plan.chapter_fingerprint('02')}.pt").is_file()
    next(shared.glob("ch02-*.pt")).write_bytes(b"damaged")        # never trusted beyond loading and fitting
    plan.use_store(tmp_path / "third_out" / ".prepared")
    assert_same(first, again("02"))
    assert calls == ["02", "02"]
    assert conftest_shared() == plan.SHARED


def conftest_shared() -> str:
    from .. import conftest
    return conftest.SHARED


def test_a_shared_folder_others_can_read_is_not_used_and_the_run_says_so(store, monkeypatch, tmp_path, capsys):
    folder, calls = store
    shared = tmp_path / "open"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv(plan.SHARED, str(shared))
    monkeypatch.setattr(plan, "_REFUSED", set())
    again("01")
    assert calls == ["01"] and not list(shared.iterdir())         # expected values never written there
    assert "is not yours alone: `chmod 700` it" in capsys.readouterr().err
    plan.use_store(tmp_path / "another_out" / ".prepared")
    again("01")
    assert calls == ["01", "01"] and capsys.readouterr().err == ""  # said once a process


def test_a_chapter_saved_into_a_runs_store_is_loaded_by_that_run(store, tmp_path):
    """plan.save_prepared: what a test hands a `course grade` run before it starts (test_busy_machine.py)."""
    folder, calls = store
    first = again("02")
    run_store = tmp_path / "out" / ".prepared"
    path = plan.save_prepared("02", run_store)                     # from memory: nothing computed again
    assert calls == ["02"] and path.name == f"ch02-{plan.chapter_fingerprint('02')}.pt"
    plan.use_store(run_store)
    assert_same(first, again("02"))
    assert calls == ["02"], "the run computed again instead of loading what was saved into its store"
