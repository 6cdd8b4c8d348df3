"""No hidden input is anywhere learner code can read it while any text of that code can still reach a learner
(issue 26, point 1). Graded for real, in the sandbox: a planted learner that, on every public case of chapter
02, reads every inputs file of its run folder it can reach and every dict in its own memory, looks for the
hidden cases' inputs there, and raises with what it found; the public rows show that text.

The planted code is told what to look for (the first values of each hidden case's query, as an adversary
who had them would search): whatever form the inputs take on disk or in memory, a match is a leak.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from course_lib.provided.layout import LAYOUT

from .. import planted

pytestmark = [
    pytest.mark.skipif(not (LAYOUT.root / "solutions" / "hidden" / "ch02.py").is_file(),
                       reason="the hidden cases ship only with the instructor's repository"),
    pytest.mark.grading,
]

READER = '''

def _look():
    import gc, json, os
    import torch
    box = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    targets = TARGETS

    def hits(value):
        try:
            return (isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() >= 3
                    and [round(v, 5) for v in value.flatten()[:3].tolist()] in targets)
        except Exception:
            return False

    found, files = 0, 0
    for folder, _, names in os.walk(box):
        for name in names:
            try:
                data = torch.load(os.path.join(folder, name), weights_only=True)
            except Exception:
                continue
            files += 1
            for item in data if isinstance(data, list) else [data]:
                if isinstance(item, dict):
                    found += sum(hits(v) for v in item.values())
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            found += sum(hits(v) for v in list(obj.values()))
    with open(os.path.join(box, "job.json"), encoding="utf-8") as fh:
        cases = sum(len(c["cases"]) for c in json.load(fh)["chapters"])
    return f"READER cases={cases} found={found} files={files}"


def scaled_dot_product_attention(query, key, value, mask=None):
    raise RuntimeError(_look())
'''


def test_public_cases_never_see_a_hidden_input(tmp_path: Path) -> None:
    from course_admin.grading import grade, plan
    from course_admin.intake.submissions import Reader
    from course_admin.records.rows import Options
    from course_admin.sandbox import cold, warm

    ch02 = plan.prepare("02")
    hidden = [g for g in ch02.cases if g.hidden]
    public = [g for g in ch02.cases if not g.hidden]
    assert hidden, "chapter 02 has hidden cases"
    targets = [[round(v, 5) for v in ch02.inputs[g.index]["query"].flatten()[:3].tolist()] for g in hidden]
    (tmp_path / "eve" / "course_lib").mkdir(parents=True)
    code = planted.REFERENCE + READER.replace("TARGETS", repr(targets))
    (tmp_path / "eve" / "course_lib" / "attention.py").write_text(code, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    try:
        rows = grade.course_lib_rows(Reader(tmp_path / "eve"), ["02"], Options(isolation=cold.detect(),
                                     timeout_s=60, notebooks=False), work)["02"]
    finally:
        warm.shutdown()  # no sandbox of this test process outlives the test
    said = [r.message for r in rows if "READER" in r.message]
    assert said, [r.message for r in rows][:3]
    for text in said:
        assert "found=0 " in text, f"a public case found a hidden case's inputs: {text}"
        assert f"cases={len(public)} " in text, f"the public phase's job lists more than the public cases: {text}"
    assert all("READER" not in r.message for r in rows if r.component.startswith("hidden case")), \
        "learner text reached a hidden row"
