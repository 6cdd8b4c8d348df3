"""Grade one learner's course_lib on one chapter: a snapshot in a sandbox, the child runs the probes,
the outputs come back as data and are judged here (verdict.py).

The sandbox folder holds the instructor's ``course_lib/__init__.py`` and ``provided/``, the learner's
files of the chapter and of the chapters it builds on (or, with ``--prereqs reference``, the reference's
files of those earlier chapters), the chapter's spec, the child script and the inputs. Nothing else.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from course_lib.provided.checking import CheckFailure
from course_lib.provided.layout import LAYOUT, owner_of

from . import sandbox
from .plan import Chapter
from .rows import GradeRow, Options
from .source_scan import with_source_scans
from .submissions import Reader, SubmissionError
from .verdict import decode, describe_exit, judge_case, zero_rows

CHILD = Path(__file__).resolve().parent / "child.py"
MAX_RESTARTS = 3
RESULT_MAX_BYTES = 16 * 1024**2


def fill_snapshot(reader: Reader, dest: Path, modules: list[str], from_reference: list[str] = ()) -> list[str]:
    """Write ``dest/course_lib``: the instructor's package frame, the learner's ``modules`` (those in
    ``from_reference`` from the reference instead). Returns the modules that the submission lacks."""
    package = dest / "course_lib"
    shutil.copytree(LAYOUT.course_lib / "provided", package / "provided",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(LAYOUT.course_lib / "__init__.py", package / "__init__.py")
    missing = []
    for module in modules:
        if module in from_reference:
            shutil.copyfile(LAYOUT.reference / module, package / module)
            continue
        rel = reader.base + "course_lib/" + module
        if reader.exists(rel):
            (package / module).write_bytes(reader.read(rel))
        else:
            missing.append(module)
    return missing


def missing_message(chapter: Chapter, missing: list[str]) -> str:
    parts = []
    for module in missing:
        owner = owner_of(module)
        why = "" if owner == chapter.number else f" (chapter {owner}, which chapter {chapter.number} builds on)"
        parts.append(f"course_lib/{module}{why}")
    return (f"{', '.join(parts)} {'is' if len(parts) == 1 else 'are'} missing from the submission "
            "(run `course submit` from your course folder)")


def grade_course_lib(reader: Reader, chapter: Chapter, opts: Options, work: Path) -> list[GradeRow]:
    """Every case of ``chapter`` on the learner's snapshot, judged; never raises for a learner's fault.

    A ready-made case ("built from scratch") is decided here, from the submitted bytes (source_scan.py)."""
    box = Path(tempfile.mkdtemp(prefix=f"ch{chapter.number}_", dir=work))
    try:
        substitute = chapter.prereq_modules() if opts.prereqs == "reference" else []
        try:
            missing = fill_snapshot(reader, box, chapter.modules, substitute)
        except SubmissionError as exc:
            return zero_rows(chapter, "error", f"submission not graded: {exc}")
        if missing:
            return zero_rows(chapter, "missing", missing_message(chapter, missing))
        _write_job(box, chapter, opts)
        failures = _run_child(box, chapter, opts, work)
        rows = [judge_case(chapter, g, _outcome(box, g.index, failures), opts.isolation) for g in chapter.cases]
        return with_source_scans(reader, chapter, rows)
    finally:
        shutil.rmtree(box, ignore_errors=True)


def _write_job(box: Path, chapter: Chapter, opts: Options) -> None:
    spec_name = f"spec_ch{chapter.number}.py"
    shutil.copy2(LAYOUT.spec(chapter.number), box / spec_name)
    shutil.copy2(CHILD, box / "_grader_child.py")
    shutil.copy2(chapter.inputs_file, box / "inputs.pt")
    (box / "out").mkdir()
    _, prefix, site = sandbox.python_paths()
    job = {"chapter": chapter.number, "spec": spec_name, "site_packages": str(site),
           "python_prefix": str(prefix), "output_cap": 1024**2, "audit": opts.isolation == "rlimits",
           "cases": [{"index": g.index, "probe": g.case.probe} for g in chapter.cases]}
    (box / "job.json").write_text(json.dumps(job))


def _run_child(box: Path, chapter: Chapter, opts: Options, work: Path) -> dict[int, str]:
    """Run the child from the first case without a result until all have one, the time is up, or it
    has died too often. Returns a message for each case that the child could not finish."""
    exe, _, _ = sandbox.python_paths()
    limits = sandbox.Limits(wall_s=opts.timeout_s, memory_bytes=opts.memory_mb * 1024**2)
    messages: dict[int, str] = {}
    n = len(chapter.cases)
    start, restarts = 0, 0
    deadline = time.monotonic() + opts.timeout_s
    log = work / f"ch{chapter.number}_{uuid.uuid4().hex[:6]}.log"
    while start < n:
        remaining = deadline - time.monotonic()
        if remaining < 1:
            _rest(messages, start, n, f"not run: the time limit ({opts.timeout_s:g} s per chapter) was reached")
            break
        inner = [str(exe), "-I", "-S", "/sandbox/_grader_child.py", str(start)]
        result = sandbox.run(box, inner, dataclasses.replace(limits, wall_s=remaining), opts.isolation, log)
        done = {int(p.stem) for p in (box / "out").glob("[0-9][0-9][0-9].pt")}
        gap = next((i for i in range(start, n) if i not in done), None)
        if gap is None:
            break
        if result.timed_out:
            messages[gap] = (f"did not finish within the time limit ({opts.timeout_s:g} s per chapter); "
                             "the process was stopped")
            _rest(messages, gap + 1, n, "not run: the time limit was reached in an earlier case")
            break
        messages[gap] = f"the grading process ended during this case ({describe_exit(result.returncode)})"
        restarts += 1
        start = gap + 1
        if restarts > MAX_RESTARTS:
            _rest(messages, start, n, f"not run: the grading process ended {restarts} times")
            break
    return messages


def _rest(messages: dict[int, str], start: int, end: int, text: str) -> None:
    for i in range(start, end):
        messages.setdefault(i, text)


def _outcome(box: Path, index: int, failures: dict[int, str]) -> Any:
    """The decoded outputs of one case, or a CheckFailure saying why there are none."""
    path = box / "out" / f"{index:03d}.pt"
    if not path.is_file():
        return CheckFailure(failures.get(index, "no result: the grading process wrote nothing for this case"))
    try:
        if path.stat().st_size > RESULT_MAX_BYTES:
            raise ValueError("too large")
        return decode(torch.load(path, weights_only=True, map_location="cpu"))
    except Exception as exc:  # noqa: BLE001 - anything a child could leave behind
        return CheckFailure(f"the result of this case could not be read ({type(exc).__name__})")
