"""The grader's reading of what a hostile learner hands back, one piece at a time and without a sandbox
(issue 17, points 2 and 5a): result frames checked before and after loading (a DEFLATE bomb costs no
memory, a stride-0 view or a sparse tensor is refused), a worker process that dies costs only the learner
it held, a manifest of large members costs a bounded read, a folder of large files a bounded fingerprint,
and a notebook nested 200,000 deep fails only its own rows. The same graded end to end:
test_results_hostile.py.
"""
from __future__ import annotations

import io
import os
import pickle
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from course_lib.provided.layout import LAYOUT

from .. import planted as plant
from .. import planted_results as hostile

REPO = LAYOUT.root
pytestmark = [
    pytest.mark.skipif(not (REPO / "solutions" / "course_admin" / "grading" / "grade.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]
SOFT_AS = 6 * 1024**3  # the process that reads a frame: a bomb that got through fails here, not on the machine


# ---------------------------------------------------------------- frames
def _saved(record) -> bytes:
    buffer = io.BytesIO()
    torch.save(record, buffer)  # as the child does: into memory, then onto the pipe
    return buffer.getvalue()


RECORDS = [{"kind": "ready"}, {"kind": "exception", "message": "raised ValueError: x"},
           {"kind": "not_dict", "type": "ndarray"}, {"kind": "outputs", "outputs": {"output": {"not_tensor": "list"}}},
           {"kind": "outputs", "outputs": {f"t{i}": t for i, t in enumerate([
               torch.ones(3, 4), torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float16),
               torch.ones(2, dtype=torch.bfloat16), torch.arange(5), torch.tensor([True]), torch.zeros(0, 3),
               torch.tensor(2.5), torch.ones(4)[1:3].clone()])}}]


def test_what_torch_save_writes_is_what_a_frame_may_hold(tmp_path):
    from course_admin.sandbox import results

    names = set(zipfile.ZipFile(io.BytesIO(_saved(RECORDS[-1]))).namelist())
    folder, fixed = results.archive_names()
    assert names == set(fixed) | {f"{folder}/data/{i}" for i in range(9)}, names
    for record in RECORDS:
        (tmp_path / "000.pt").write_bytes(_saved(record))
        assert results.read_result(tmp_path / "000.pt").keys() == record.keys()


def _crafted() -> dict[str, bytes]:
    """Frames torch.save does not write, each refused for its own reason."""
    good = _saved({"kind": "outputs", "outputs": {"output": torch.ones(4)}})
    archive = zipfile.ZipFile(io.BytesIO(good))
    members = {i.filename: archive.read(i) for i in archive.infolist()}

    def rezip(change=lambda m: m, compress=zipfile.ZIP_STORED) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compress) as zf:
            for name, data in change(dict(members)).items():
                zf.writestr(name, data)
        return out.getvalue()

    evil = pickle.dumps({"kind": "outputs", "outputs": {}}, protocol=2).replace(b"}q\x00", b"cos\nsystem\nq\x00", 1)
    return {"compressed": rezip(compress=zipfile.ZIP_DEFLATED),
            "torch.save does not write": rezip(lambda m: {**m, "archive/extra": b"x"}),
            "object other than dense tensors": rezip(lambda m: {**m, "archive/data.pkl": evil}),
            "no pickle": rezip(lambda m: {k: v for k, v in m.items() if not k.endswith("data.pkl")}),
            "sparse": _saved({"o": torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (5,),
                                                           check_invariants=True)}),
            "strided view": hostile.stride0_frame(),
            "not a readable zip": b"PK\x03\x04" + b"\0" * 100}


CRAFTED = ["compressed", "torch.save does not write", "object other than dense tensors", "no pickle", "sparse",
           "strided view", "not a readable zip"]


@pytest.mark.parametrize("why", CRAFTED)
def test_a_crafted_frame_is_refused_for_its_reason(tmp_path, why):
    from course_admin.grading import sandboxed
    from course_admin.grading.verdict import GraderFailure

    (tmp_path / "out").mkdir()
    crafted = _crafted()
    assert sorted(crafted) == sorted(CRAFTED)
    (tmp_path / "out" / "000.pt").write_bytes(crafted[why])
    outcome = sandboxed._outcome(tmp_path, 0, {})
    assert isinstance(outcome, GraderFailure), outcome
    reason = {"sparse": "object other than dense tensors"}.get(why, why)
    assert reason in str(outcome) and outcome.hidden == sandboxed.REFUSED_HIDDEN, str(outcome)


PROBE = ("import resource, sys, time\n"
         "from pathlib import Path\n"
         "from course_admin.grading import sandboxed\n"
         "box = Path(sys.argv[1])\n"
         "outcome = sandboxed._outcome(box, 0, {})\n"
         "print(type(outcome).__name__, str(outcome)[:200])\n"
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")


def _outcome_elsewhere(box: Path) -> tuple[str, int]:
    """_outcome on ``box``'s frame 000 in a process of its own, under RLIMIT_AS: (what it said, peak RSS bytes)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (SOFT_AS, resource.RLIM_INFINITY))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "solutions"), str(REPO)])}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(box)], capture_output=True, text=True, timeout=300,
                          env=env, preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said, rss = proc.stdout.strip().rsplit("\n", 1)
    return said, int(rss) * 1024


def test_a_deflate_bomb_frame_is_refused_before_anything_is_inflated(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "000.pt").write_bytes(_saved({"kind": "outputs", "outputs": {"output": torch.ones(4)}}))
    said, baseline = _outcome_elsewhere(tmp_path)
    assert said.startswith("dict")
    frame = hostile.bomb_frame(512 * 2**20, 2)  # 1 GiB declared, 1 MB on disk
    assert len(frame) < 4 * 2**20
    (tmp_path / "out" / "000.pt").write_bytes(frame)
    said, peak = _outcome_elsewhere(tmp_path)
    assert said.startswith("GraderFailure") and "compressed member" in said, said
    assert peak - baseline < 128 * 2**20, f"reading the frame took {(peak - baseline) >> 20} MiB more"


# ---------------------------------------------------------------- a worker that dies costs only its learner
def test_a_worker_that_dies_costs_only_the_learner_it_held(tmp_path):
    from course_admin.grading.batch import WORKER_DIED, run_batch
    from course_admin.records.rows import Options
    from course_admin.intake.submissions import Submission

    names = ["ann", "bob", "killer", "cid", "dan", "eve"]
    todo = [Submission(n, tmp_path / n, chapter="02", fingerprint=f"fp-{n}") for n in names]
    recorded = []
    run_batch(todo, ["02"], Options(), 2, recorded.append, hostile.fake_grade)
    by = {}
    for g in recorded:
        by.setdefault(g.learner, []).append(g)
    assert sorted(by) == sorted(names) and all(len(gs) == 1 for gs in by.values()), [g.learner for g in recorded]
    for name in names:  # graded normally, those queued behind the killer too
        if name != "killer":
            assert by[name][0].fingerprint == f"fp-{name}" and [r.status for r in by[name][0].rows] == ["pass"], by[name]
    killer = by["killer"][0]  # every case at 0, saying why; graded again by the next run
    assert killer.fingerprint == "retry:fp-killer" and killer.rows and all(r.message == WORKER_DIED for r in killer.rows)
    assert all(r.points == 0 and r.max_points > 0 for r in killer.rows)


# ---------------------------------------------------------------- what a manifest can make a run read
def test_discovery_reads_no_manifest_member_and_grading_a_bounded_few(tmp_path, monkeypatch):
    from course_admin.intake import manifest, submissions

    hostile.big_manifest_zip(tmp_path / "big_manifest_ch02.zip")
    read = []
    real = submissions.Reader.read
    monkeypatch.setattr(submissions.Reader, "read", lambda self, rel, limit=submissions.MAX_FILE_BYTES:
                        read.append(len(data := real(self, rel, limit))) or data)
    [sub] = submissions.discover([tmp_path])
    assert sub.error is None and sum(read) < 2**20, f"discovery read {sum(read) >> 20} MiB"
    read.clear()
    warnings = manifest.manifest_warnings(submissions.Reader(sub.path), sub.manifest)
    assert sum(read) <= manifest.MANIFEST_MAX_BYTES + 2**20, f"the manifest check read {sum(read) >> 20} MiB"
    assert [w for w in warnings if "were not checked" in w and "blob_" in w], warnings
    assert not [w for w in warnings if "changed after" in w], warnings


class _CountedFile:
    """A file opened for reading whose reads add their sizes to ``counts`` (the bytes a function read)."""

    def __init__(self, fh, counts: list[int]) -> None:
        self.fh, self.counts = fh, counts

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.counts.append(len(data))
        return data

    def __enter__(self) -> "_CountedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def test_a_folder_of_large_files_is_fingerprinted_by_a_bounded_read(tmp_path, monkeypatch):
    """The bytes the fingerprint reads are counted (never timed): at most its budget, of 2 GB of files."""
    from course_admin.intake import submissions

    folder = tmp_path / "sam"
    (folder / "course_lib").mkdir(parents=True)
    (folder / "course_lib" / "attention.py").write_text(plant.REFERENCE)
    for k in range(hostile.BIG_MEMBERS):
        with open(folder / f"blob_{k:03d}.bin", "wb") as fh:
            fh.truncate(hostile.BIG_BYTES)  # sparse: no disk used
    counts: list[int] = []
    monkeypatch.setattr(submissions, "open", lambda *a, **k: _CountedFile(open(*a, **k), counts), raising=False)
    first = submissions.Reader(folder).fingerprint()
    monkeypatch.undo()
    assert sum(counts) <= submissions.FINGERPRINT_MAX_BYTES + 2**20, \
        f"the fingerprint read {sum(counts) >> 20} MiB of {hostile.BIG_MEMBERS * hostile.BIG_BYTES >> 20} MiB"
    assert submissions.Reader(folder).fingerprint() == first
    (folder / "course_lib" / "attention.py").write_text(plant.NO_SCALE)
    assert submissions.Reader(folder).fingerprint() != first


# ---------------------------------------------------------------- a notebook nested 200,000 deep, alone
def test_reading_a_deep_notebook_fails_only_its_rows(tmp_path):
    from course_admin.grading import grade, plan
    from course_admin.intake.submissions import Reader

    (tmp_path / "sam" / "course_lib").mkdir(parents=True)
    (tmp_path / "sam" / "ch02_attention.ipynb").write_text(hostile.DEEP_NOTEBOOK)
    rows = grade.notebook_rows(Reader(tmp_path / "sam"), plan.prepare("02"))
    assert rows and all(r.kind == "notebook" and r.status == "fail" and "nested too deeply" in r.message for r in rows)
