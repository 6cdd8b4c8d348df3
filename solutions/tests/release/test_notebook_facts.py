"""What each exercise notebook tells the learner is what the course grades, and what it measured.

The header of every released notebook (exercises/chNN_<name>/) states the chapter's points: public cases
(tests/specs/chNN.py), hidden cases (solutions/hidden/chNN.py) and written answers (the source notebook's
graded cells). This test counts them itself, reading those files, and compares them with the words of
the released header, so a case or a point added without `course release` fails here. The capstone's
commands (chapter 08) give every run its own --out and the times of the measured record.
"""
from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from course_lib.provided.capstone import handin
from course_lib.provided.layout import REPO_ROOT, Layout

from course_admin.release import capstone_times
from course_admin.release.notebook_facts import filled_source
from course_admin.release.stubs import ReleaseError

RELEASED = sorted((REPO_ROOT / "exercises").glob("ch[0-9][0-9]_*/*.ipynb"))
NUMBER = r"(\d+(?:\.\d+)?)"


def cases_of(path: Path) -> list:
    """The CASES of a spec or hidden-case file, imported afresh (never a cached module)."""
    if not path.is_file():
        return []
    spec = importlib.util.spec_from_file_location(f"facts_test_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CASES)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def answers(path: Path) -> list[tuple[str, float]]:
    """(grade_id, points) of the notebook's written answers: markdown cells graded by hand."""
    return [(c["metadata"]["nbgrader"]["grade_id"], float(c["metadata"]["nbgrader"]["points"])) for c in cells(path)
            if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "markdown"]


def said(pattern: str, header: str) -> tuple[float, ...] | None:
    m = re.search(pattern, " ".join(header.split()))
    return tuple(float(g) for g in m.groups()) if m else None


def header_problems(root: Path) -> list[str]:
    """For each released notebook under ``root``: where its header disagrees with the points counted here."""
    layout, problems = Layout(root), []
    for released in sorted((root / "exercises").glob("ch[0-9][0-9]_*/*.ipynb")):
        number, name = released.parent.name[2:4], released.parent.name
        public, hidden = cases_of(layout.spec(number)), cases_of(layout.hidden_file(number))
        written = [p for _, p in answers(layout.sources / name / released.name)]
        model = handin.POINTS if number == handin.CHAPTER else 0.0  # chapter 08's trained model (grading/trained.py)
        want = {"total": (sum(c.points for c in public) + sum(c.points for c in hidden) + sum(written) + model,),
                "public": (sum(c.points for c in public), len(public)),
                "hidden": (sum(c.points for c in hidden), len(hidden)) if hidden else None,
                "written": (sum(written), len(written)) if written else None,
                "model": (model, round(100 * handin.BAR)) if model else None}
        header = "\n".join(text(c) for c in cells(released) if "What is graded" in text(c))
        got = {"total": said(rf"What is graded: {NUMBER} points? in all", header),
               "public": said(rf"\*\*{NUMBER} points?\*\*: the (\d+) public checks?", header),
               "hidden": said(rf"\*\*{NUMBER} points?\*\*: (\d+) hidden checks?", header),
               "written": said(rf"\*\*{NUMBER} points?\*\*: (\d+) written answers?", header),
               "model": said(rf"\*\*{NUMBER} points?\*\*: your trained model, .*? must reach (\d+)%", header)}
        problems += [f"{name}: {part}: the header says {got[part]}, the chapter has {want[part]}"
                     for part in want if got[part] != want[part]]
        split = re.search(r"written answers in this notebook \(([\d. +]+)\)", " ".join(header.split()))
        if len(written) > 1 and (not split or [float(p) for p in split.group(1).split("+")] != written):
            problems.append(f"{name}: the written answers' points are not listed one by one as {written}")
        notebook = cells(released)
        for i, cell in enumerate(notebook):
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("grade"):
                heading = said(rf"\({NUMBER} points?, graded by hand\)", text(notebook[i - 1]))
                if heading != (float(meta["points"]),):
                    problems.append(f"{name}: the question before {meta['grade_id']} says {heading}, "
                                    f"the answer is worth {meta['points']}")
    return problems


def test_every_released_header_states_the_chapters_points() -> None:
    assert RELEASED, "no released notebook"
    assert header_problems(REPO_ROOT) == []


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    """What the headers are made from and checked against, copied."""
    for folder in ("exercises", "solutions/source", "solutions/hidden", "solutions/learner", "tests/specs"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_a_case_added_without_a_release_is_caught(copy: Path) -> None:
    before = set(header_problems(copy))
    hidden = copy / "solutions" / "hidden" / "ch02.py"
    hidden.write_text(hidden.read_text(encoding="utf-8") + "\nCASES = CASES + CASES[:1]  # one more, no release\n",
                      encoding="utf-8")
    problems = set(header_problems(copy)) - before
    assert problems and all(p.startswith("ch02_attention: ") for p in problems), problems
    assert any("hidden" in p for p in problems) and any("total" in p for p in problems)
    # what `course release --check` compares: the source notebook the release writes is no longer the tree's
    source = copy / "solutions" / "source" / "ch02_attention" / "ch02_attention.ipynb"
    assert filled_source(Layout(copy), source) != source.read_text(encoding="utf-8")


def test_the_release_writes_the_points_of_each_written_question(copy: Path) -> None:
    source = copy / "solutions" / "source" / "ch02_attention" / "ch02_attention.ipynb"
    nb = json.loads(source.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "answer-heatmap":
            cell["metadata"]["nbgrader"]["points"] = 4
    source.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    filled = json.loads(filled_source(Layout(copy), source))["cells"]
    at = [i for i, c in enumerate(filled) if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer-heatmap"][0]
    assert "(4 points, graded by hand)" in text(filled[at - 1])
    assert "(2 + 4)" in " ".join(text(filled[0]).split()) and "**6 points**: 2 written answers" in text(filled[0])


def test_a_notebook_without_its_points_block_is_refused(copy: Path) -> None:
    source = copy / "solutions" / "source" / "ch02_attention" / "ch02_attention.ipynb"
    nb = json.loads(source.read_text(encoding="utf-8"))
    nb["cells"][0]["source"] = [line for line in nb["cells"][0]["source"] if "generated" not in line]
    source.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ReleaseError, match="no generated block `points`"):
        filled_source(Layout(copy), source)


# ------------------------------------------------------------------ chapter 08: the capstone's runs
CH08 = REPO_ROOT / "exercises" / "ch08_capstone" / "ch08_capstone.ipynb"


def capstone_commands() -> list[list[str]]:
    """The `course capstone` commands of the chapter 08 notebook's code blocks, as argument lists."""
    found = []
    for cell in cells(CH08):
        for block in re.findall(r"```bash\n(.*?)```", text(cell), re.S):
            found += [line.split() for line in block.splitlines() if "course capstone" in line]
    return found


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_each_capstone_run_has_its_own_out_folder() -> None:
    commands = capstone_commands()
    pretrain = [c for c in commands if c[2] == "pretrain"]
    finetunes = [c for c in commands if c[2] == "finetune"]
    assert len(pretrain) == 1 and len(finetunes) == 2, commands
    outs = [option(c, "--out") for c in finetunes]
    assert None not in outs and len(set(outs)) == 2, f"two fine-tunings in one folder: {outs}"
    pretrained = [c for c in finetunes if "--pretrained" in c]
    assert len(pretrained) == 1
    assert option(pretrained[0], "--pretrained") == f"{option(pretrain[0], '--out')}/pretrain-transformer-quick"


def test_the_capstone_times_are_the_measured_ones() -> None:
    record = json.loads((REPO_ROOT / "solutions" / "learner" / "capstone_times.json").read_text(encoding="utf-8"))
    notebook = "\n".join(text(c) for c in cells(CH08))
    told = []
    for run in capstone_times.RUNS:
        measured = record["runs"][run.key]
        assert measured["command"] == capstone_times.command(run), "the record measured another command"
        told.append(max(1, math.ceil(measured["cpu_seconds"] / 60)))
        assert capstone_times.command(run) in notebook
        assert f"{run.what} | about {told[-1]} min |" in notebook
    assert f"About {sum(told)} minutes in all" in " ".join(notebook.split())
