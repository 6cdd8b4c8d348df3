"""`course grade SUBMISSIONS... --out DIR [--chapters ch02 ...] [--jobs N] [--timeout S]`

Grades a class: for every learner and chapter, the chapter's public and hidden cases on the learner's
own course_lib files, run in a sandbox (see sandbox.py), judged here against the reference; then the
chapter's notebook through nbgrader when that tool is present (notebooks.py). Writes DIR/gradebook.sqlite
(committed learner by learner; a re-run skips finished learners whose submission did not change),
DIR/grades.csv, DIR/totals.csv and DIR/feedback/<learner>.md.

This process never imports learner code: it makes the inputs, computes expected values and the outputs
of known-wrong variants with the reference, and only *loads data* (torch.load weights_only=True) that
the sandboxed child wrote.
"""
from __future__ import annotations

import argparse
import atexit
import dataclasses
import concurrent.futures as futures
import hashlib
import importlib.util
import json
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from course_lib.provided import chapters as chapters_mod
from course_lib.provided.checking import Case, CheckFailure, judge
from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import load_file

from . import sandbox
from .gradebook import Gradebook
from .manual import read_manual_scores
from .submissions import Reader, Submission, SubmissionError, discover

HERE = Path(__file__).resolve().parent
MAX_RESTARTS = 3
RESULT_MAX_BYTES = 16 * 1024**2


# ---------------------------------------------------------------- chapters: cases, inputs, expected values
@dataclass
class GradedCase:
    index: int
    case: Case
    hidden: bool
    label: str          # the component name shown to the learner


@dataclass
class Chapter:
    number: str
    spec: Any
    cases: list[GradedCase]
    inputs: list[dict[str, torch.Tensor]]
    expected: list[dict[str, torch.Tensor]]
    mistakes: list[dict[str, dict[str, torch.Tensor]]]
    inputs_file: Path
    modules: list[str]


def hidden_cases(number: str) -> list[Case]:
    path = LAYOUT.hidden_file(number)
    if not path.is_file():
        return []
    return list(load_file(f"course_hidden_ch{number}", path).CASES)


_CHAPTERS: dict[str, Chapter] = {}
_CACHE_DIR: Path | None = None


def prepare(number: str) -> Chapter:
    """Inputs, expected outputs and known-wrong outputs of every case (cached per process)."""
    global _CACHE_DIR
    if number in _CHAPTERS:
        return _CHAPTERS[number]
    from .refs import outputs_for

    spec = chapters_mod.load_spec(number)
    graded = [GradedCase(i, c, False, c.name) for i, c in enumerate(spec.CASES)]
    for k, c in enumerate(hidden_cases(number), start=1):
        graded.append(GradedCase(len(graded), c, True, f"hidden case {k}"))
    inputs, expected, mistakes = [], [], []
    for g in graded:
        torch.manual_seed(0)
        x = g.case.make_inputs(g.case.seed)
        out = outputs_for(number, g.case, x)
        inputs.append(x)
        expected.append(out["expected"])
        mistakes.append(out["mistakes"])
    if _CACHE_DIR is None:
        _CACHE_DIR = Path(tempfile.mkdtemp(prefix=f"course_grade_{os.getpid()}_inputs_"))
        atexit.register(shutil.rmtree, _CACHE_DIR, True)
    inputs_file = _CACHE_DIR / f"ch{number}_inputs.pt"
    torch.save([{k: v.clone() for k, v in x.items()} for x in inputs], inputs_file)
    chapter = Chapter(number, spec, graded, inputs, expected, mistakes, inputs_file, list(spec.MODULES))
    _CHAPTERS[number] = chapter
    return chapter


def grader_fingerprint(numbers: list[str]) -> str:
    """Changes when the chapters graded, their specs, hidden cases, mistakes or reference change."""
    h = hashlib.sha256(",".join(numbers).encode())
    for number in numbers:
        for path in (LAYOUT.spec(number), LAYOUT.hidden_file(number), LAYOUT.mistakes_file(number)):
            h.update(path.read_bytes() if path.is_file() else b"-")
    for path in LAYOUT.reference_modules():
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- messages
def redact_hidden(message: str, names: list[str], mistake_messages: dict[str, str]) -> str:
    """A hidden case's message without its inputs, shapes or values."""
    if names:
        return " Or: ".join(mistake_messages[n] for n in names)
    m = message
    if re.match(r"^[\w.]+: expected a torch\.Tensor", m):
        return m.split(",")[0]
    if re.match(r"^[\w.]+: dtype ", m):
        return "wrong dtype (keep the dtype of the inputs)"
    if re.match(r"^[\w.]+: shape ", m):
        return f"wrong shape of {m.split(':')[0]}"
    if re.match(r"^[\w.]+: \d+ (NaN|inf) value", m):
        return f"{m.split(':')[0]}: NaN or inf values where the reference is finite"
    if re.match(r"^[\w.]+: values differ", m):
        return f"{m.split(':')[0]}: values differ from the reference"
    if m.startswith("raised "):
        exc = m.split(":")[0]
        where = re.search(r"\(at ([\w.]+:\d+)", m)
        return exc + (f" (at {where.group(1)})" if where else "")
    if m.startswith(("not implemented yet", "missing result", "the probe returned", "not run:",
                     "did not finish", "the grading process", "the result ", "no result")):
        return m
    return "failed"


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "stopped at the time limit"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        extra = " (killed: often the memory limit)" if name == "SIGKILL" else ""
        return f"killed by {name}{extra}"
    return f"exit status {rc}" + (": something called os._exit or sys.exit" if rc in (0, 1) else "")


class _NotTensor:
    pass


def _decode(record: Any) -> Any:
    """The child's record -> outputs dict or an exception, validating every piece."""
    if not isinstance(record, dict):
        raise ValueError("not a dict")
    kind = record.get("kind")
    if kind == "exception":
        return CheckFailure(str(record.get("message", "raised an exception"))[:600])
    if kind == "not_dict":
        return type(str(record.get("type", "object"))[:60], (), {})()
    if kind != "outputs" or not isinstance(record.get("outputs"), dict):
        raise ValueError("unknown record")
    outputs = {}
    for key, value in record["outputs"].items():
        if type(value) is torch.Tensor:
            outputs[str(key)] = value
        elif isinstance(value, dict) and isinstance(value.get("not_tensor"), str):
            outputs[str(key)] = type(re.sub(r"\W", "_", value["not_tensor"][:60]) or "object", (_NotTensor,), {})()
        else:
            raise ValueError(f"bad value for {key!r}")
    return outputs


# ---------------------------------------------------------------- one learner, one chapter
def _copy_allowed(reader: Reader, box: Path, modules: list[str]) -> list[str]:
    """Instructor's course_lib/__init__.py and provided/, plus the learner's ``modules`` only."""
    src = LAYOUT.course_lib
    dst = box / "course_lib"
    shutil.copytree(src / "provided", dst / "provided", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(src / "__init__.py", dst / "__init__.py")
    present = []
    for module in modules:
        rel = reader.base + "course_lib/" + module
        if reader.exists(rel):
            (dst / module).write_bytes(reader.read(rel))
            present.append(module)
    return present


def grade_course_lib(reader: Reader, chapter: Chapter, opts: dict, work: Path) -> list[dict]:
    isolation = opts["isolation"]
    rows: list[dict] = []

    def row(g: GradedCase, earned: float, status: str, message: str, iso: str = isolation) -> dict:
        return {"chapter": chapter.number, "kind": "course_lib", "component": g.label,
                "points": earned, "max_points": g.case.points, "status": status, "message": message,
                "isolation": iso}

    box = Path(tempfile.mkdtemp(prefix=f"ch{chapter.number}_", dir=work))
    try:
        present = _copy_allowed(reader, box, chapter.modules)
    except SubmissionError as exc:
        return [row(g, 0.0, "error", f"submission not graded: {exc}", "none") for g in chapter.cases]
    missing = [m for m in chapter.modules if m not in present]
    if missing:
        msg = (f"course_lib/{', course_lib/'.join(missing)} is missing from the submission "
               "(run `course submit` from your course folder)")
        return [row(g, 0.0, "missing", msg, "none") for g in chapter.cases]
    spec_name = f"spec_ch{chapter.number}.py"
    shutil.copy2(LAYOUT.spec(chapter.number), box / spec_name)
    shutil.copy2(HERE / "child.py", box / "_grader_child.py")
    shutil.copy2(chapter.inputs_file, box / "inputs.pt")
    (box / "out").mkdir()
    exe, prefix, site = sandbox.python_paths()
    limits = sandbox.Limits(wall_s=opts["timeout"], memory_bytes=opts["memory_mb"] * 1024**2)
    job = {"chapter": chapter.number, "spec": spec_name, "site_packages": str(site),
           "python_prefix": str(prefix), "output_cap": 1024**2, "audit": isolation == "rlimits",
           "cases": [{"index": g.index, "probe": g.case.probe} for g in chapter.cases]}
    (box / "job.json").write_text(json.dumps(job))

    messages: dict[int, str] = {}
    n = len(chapter.cases)
    start, restarts = 0, 0
    deadline = time.monotonic() + opts["timeout"]
    log = work / f"ch{chapter.number}_{uuid.uuid4().hex[:6]}.log"
    while start < n:
        remaining = deadline - time.monotonic()
        if remaining < 1:
            for i in range(start, n):
                messages.setdefault(i, f"not run: the time limit ({opts['timeout']:g} s per chapter) was reached")
            break
        inner = [str(exe), "-I", "-S", "/sandbox/_grader_child.py", str(start)]
        result = sandbox.run(box, inner, dataclasses.replace(limits, wall_s=remaining), isolation, log)
        done = {int(p.stem) for p in (box / "out").glob("[0-9][0-9][0-9].pt")}
        gap = next((i for i in range(start, n) if i not in done), None)
        if gap is None:
            break
        if result.timed_out:
            messages[gap] = (f"did not finish within the time limit ({opts['timeout']:g} s per chapter); "
                             "the process was stopped")
            for i in range(gap + 1, n):
                messages.setdefault(i, "not run: the time limit was reached in an earlier case")
            break
        messages[gap] = f"the grading process ended during this case ({describe_exit(result.returncode)})"
        restarts += 1
        start = gap + 1
        if restarts > MAX_RESTARTS:
            for i in range(start, n):
                messages.setdefault(i, f"not run: the grading process ended {restarts} times")
            break
    for g in chapter.cases:
        path = box / "out" / f"{g.index:03d}.pt"
        actual: Any
        if g.index in messages and not path.is_file():
            actual = CheckFailure(messages[g.index])
        elif not path.is_file():
            actual = CheckFailure("no result: the grading process wrote nothing for this case")
        else:
            try:
                if path.stat().st_size > RESULT_MAX_BYTES:
                    raise ValueError("too large")
                actual = _decode(torch.load(path, weights_only=True, map_location="cpu"))
            except Exception as exc:  # noqa: BLE001 - anything a child could leave behind
                actual = CheckFailure(f"the result of this case could not be read ({type(exc).__name__})")
        try:
            res = judge(chapter.number, g.case, actual, chapter.inputs[g.index], chapter.expected[g.index],
                        chapter.mistakes[g.index], chapter.spec.MISTAKES)
            earned, status, message, names = res.earned, res.status, res.message, res.mistakes
        except Exception as exc:  # noqa: BLE001
            earned, status, message, names = 0.0, "fail", f"the result could not be compared ({type(exc).__name__})", []
        if g.hidden and status != "pass":
            message = redact_hidden(message, names, chapter.spec.MISTAKES)
        rows.append(row(g, earned, status, message))
    shutil.rmtree(box, ignore_errors=True)
    return rows


# ---------------------------------------------------------------- notebooks (nbgrader, another module)
def _notebook_module():
    try:
        if importlib.util.find_spec("course_admin.notebooks") is None:
            return None
        from . import notebooks  # type: ignore[attr-defined]
        return notebooks
    except Exception:  # noqa: BLE001 - a broken optional module must not stop course_lib grading
        return None


def grade_notebooks(reader: Reader, chapter: Chapter, opts: dict, work: Path) -> tuple[list[dict], list[tuple]]:
    nb = _notebook_module()
    if nb is None or not opts.get("notebooks", True):
        return [], []
    names = reader.notebooks(chapter.number)

    def row(component: str, points: float, max_points: float, status: str, message: str) -> dict:
        return {"chapter": chapter.number, "kind": "notebook", "component": component, "points": points,
                "max_points": max_points, "status": status, "message": message, "isolation": "nbgrader"}

    if not names:
        return [row("(notebook)", 0.0, 0.0, "missing", f"no ch{chapter.number}_*.ipynb notebook in the submission")], []
    nb_work = Path(tempfile.mkdtemp(prefix=f"nb{chapter.number}_", dir=work))
    snapshot = nb_work / "snapshot"
    snapshot.mkdir()
    allowed = sorted({m for n in chapters_mod.available() for m in chapters_mod.load_spec(n).MODULES})
    rows, feedback = [], []
    try:
        _copy_allowed(reader, snapshot, allowed)
        local = nb_work / Path(names[0]).name
        local.write_bytes(reader.read(names[0], 20 * 1024**2))
        grade = nb.grade_notebook(local, snapshot, chapter.number, nb_work / "work", timeout_s=opts["nb_timeout"],
                                  memory_mb=opts["nb_memory_mb"])
        for cell in getattr(grade, "cells", []) or []:
            status = str(cell.status)
            if "manual" in status:
                status = "needs manual grading"
            rows.append(row(str(cell.name), float(cell.points or 0.0), float(cell.max_points or 0.0),
                            status, str(cell.message or "")))
        if getattr(grade, "error", None):
            rows.append(row("(notebook)", 0.0, 0.0, "error", str(grade.error)[:1000]))
        if getattr(grade, "feedback_html", None):
            feedback.append((chapter.number, f"ch{chapter.number}_notebook.html", grade.feedback_html))
    except Exception as exc:  # noqa: BLE001 - one broken notebook never stops the batch
        rows.append(row("(notebook)", 0.0, 0.0, "error", f"the notebook could not be graded ({type(exc).__name__}: "
                                                          f"{str(exc)[:300]})"))
    finally:
        shutil.rmtree(nb_work, ignore_errors=True)
    return rows, feedback


# ---------------------------------------------------------------- one learner (runs in a worker process)
@dataclass
class LearnerGrade:
    learner: str
    fingerprint: str
    source: str
    rows: list[dict]
    feedback: list[tuple] = field(default_factory=list)
    seconds: float = 0.0


def grade_learner(sub: Submission, numbers: list[str], opts: dict) -> LearnerGrade:
    t0 = time.monotonic()
    chapters = [prepare(n) for n in numbers]
    rows: list[dict] = []
    feedback: list[tuple] = []
    if sub.error:
        for ch in chapters:
            rows += [{"chapter": ch.number, "kind": "course_lib", "component": g.label, "points": 0.0,
                      "max_points": g.case.points, "status": "error",
                      "message": f"submission not graded: {sub.error}", "isolation": "none"} for g in ch.cases]
        return LearnerGrade(sub.learner, sub.fingerprint, str(sub.path), rows, seconds=time.monotonic() - t0)
    work = Path(tempfile.mkdtemp(prefix=f"course_grade_{os.getpid()}_"))
    try:
        reader = Reader(sub.path)
        for ch in chapters:
            rows += grade_course_lib(reader, ch, opts, work)
            nb_rows, nb_feedback = grade_notebooks(reader, ch, opts, work)
            rows += nb_rows
            feedback += nb_feedback
        for warning in sub.warnings:
            rows.append({"chapter": numbers[0] if numbers else "", "kind": "submission", "component": warning[:120],
                         "points": 0.0, "max_points": 0.0, "status": "warning", "message": warning,
                         "isolation": "none"})
    except SubmissionError as exc:
        rows = [{"chapter": ch.number, "kind": "course_lib", "component": g.label, "points": 0.0,
                 "max_points": g.case.points, "status": "error", "message": f"submission not graded: {exc}",
                 "isolation": "none"} for ch in chapters for g in ch.cases]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return LearnerGrade(sub.learner, sub.fingerprint, str(sub.path), rows, feedback, time.monotonic() - t0)


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # A parent killed outright (SIGKILL, OOM) must not leave workers grading on: die with it.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before the line above ran
        os._exit(1)


# ---------------------------------------------------------------- feedback
def feedback_markdown(learner: str, rows: list[dict], mistake_names: dict[str, dict[str, str]]) -> str:
    lines = [f"# Feedback for {learner}", ""]
    by_chapter: dict[str, list[dict]] = {}
    for r in rows:
        by_chapter.setdefault(r["chapter"], []).append(r)
    for number, rs in sorted(by_chapter.items()):
        title = ""
        try:
            title = " — " + chapters_mod.load_spec(number).TITLE
        except Exception:  # noqa: BLE001
            pass
        got = sum(r["points"] for r in rs)
        possible = sum(r["max_points"] for r in rs)
        lines += [f"## Chapter {number}{title}: {got:g} / {possible:g} points", ""]
        for kind, heading in (("course_lib", "course_lib checks"), ("notebook", "Notebook"),
                              ("submission", "Submission")):
            ks = [r for r in rs if r["kind"] == kind]
            if not ks:
                continue
            kp = sum(r["points"] for r in ks)
            km = sum(r["max_points"] for r in ks)
            lines += [f"### {heading}: {kp:g} / {km:g}", "", "| check | points | status |", "|---|---|---|"]
            for r in ks:
                lines.append(f"| {_md(r['component'])} | {r['points']:g} / {r['max_points']:g} | {r['status']} |")
            lines.append("")
            problems = [r for r in ks if r["status"] not in ("pass",) and r["message"]]
            if problems:
                lines += ["What to fix:", ""]
                groups: dict[str, list[str]] = {}
                for r in problems:
                    groups.setdefault(r["message"], []).append(r["component"])
                for message, components in groups.items():
                    checks = "; ".join(f"*{_md(c)}*" for c in components)
                    lines.append(f"- {_md(message)}  \n  ({len(components)} check(s): {checks})")
                lines.append("")
        named = sorted({text for r in rs for name, text in mistake_names.get(number, {}).items()
                        if r["status"] == "fail" and text in r["message"]})
        if named:
            lines += ["### Known mistakes recognised", ""] + [f"- {_md(t)}" for t in named] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def export(book: Gradebook, out: Path, numbers: list[str]) -> None:
    book.export_csv(out / "grades.csv")
    book.export_totals(out / "totals.csv")
    fb = out / "feedback"
    fb.mkdir(exist_ok=True)
    names = {}
    for n in chapters_mod.available():
        try:
            names[n] = dict(chapters_mod.load_spec(n).MISTAKES)
        except Exception:  # noqa: BLE001
            names[n] = {}
    for learner in book.learners():
        (fb / f"{learner}.md").write_text(feedback_markdown(learner, book.rows(learner), names), encoding="utf-8")
        for chapter, name, content in book.feedback_files(learner):
            (fb / f"{learner}_{Path(name).name}").write_text(content, encoding="utf-8")


# ---------------------------------------------------------------- main
def _say(line: str) -> None:
    """Progress on stdout; a closed pipe (`course grade ... | head`) silences it, never the grading."""
    try:
        print(line, flush=True)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course grade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="+", help="zips, folders, or folders of those")
    parser.add_argument("--out", required=True, help="folder for gradebook.sqlite, grades.csv, feedback/")
    parser.add_argument("--chapters", nargs="+", help="chapters to grade (default: all with checks)")
    parser.add_argument("--jobs", type=int, default=1, help="learners graded in parallel (processes)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per learner and chapter (course_lib)")
    parser.add_argument("--notebook-timeout", type=int, default=120, help="seconds per notebook")
    parser.add_argument("--memory", type=int, default=2048, help="memory limit of learner code, MB")
    parser.add_argument("--notebook-memory", type=int, default=4096,
                        help="memory limit of a notebook's kernel, MB (it imports torch and Jupyter)")
    parser.add_argument("--isolation", choices=["auto", "bwrap", "rlimits"], default="auto")
    parser.add_argument("--no-notebooks", action="store_true", help="grade course_lib only")
    parser.add_argument("--regrade", action="store_true", help="grade finished learners again")
    parser.add_argument("--manual", type=Path, metavar="NBGRADER_DB",
                        help="merge the written answers graded by hand in formgrader from this nbgrader "
                             "gradebook (e.g. grades/gradebook.db); run again after grading more")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    try:
        numbers = [chapters_mod.normalise(c) for c in args.chapters] if args.chapters else chapters_mod.available()
    except ValueError as err:
        parser.error(str(err))
    isolation = sandbox.detect(args.isolation)
    if isolation != "bwrap":
        os.environ["COURSE_GRADE_ISOLATION"] = isolation  # the notebook kernels follow the same choice
    if isolation != "bwrap" and not args.quiet:
        print(f"course grade: bubblewrap unavailable ({sandbox.bwrap_works()[1]}); "
              "falling back to rlimits, with no network or file-system isolation", file=sys.stderr)
    sandbox.sweep_stale()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    book = Gradebook(out / "gradebook.sqlite")
    if args.manual is not None:
        try:
            scores = read_manual_scores(args.manual)
        except Exception as exc:  # noqa: BLE001 - a bad gradebook is the instructor's to fix, said plainly
            parser.error(f"--manual {args.manual}: {exc}")
        book.set_manual(scores)
        if not args.quiet:
            print(f"course grade: {len(scores)} written answer(s) graded by hand, from {args.manual}")
    subs = discover(args.submissions)
    config = grader_fingerprint(numbers)
    for sub in subs:
        sub.fingerprint = f"{sub.fingerprint or 'error:' + (sub.error or '')}|{config}"
    done = {} if args.regrade else book.finished()
    todo = [s for s in subs if done.get(s.learner) != s.fingerprint]
    skipped = len(subs) - len(todo)
    run_id = uuid.uuid4().hex[:12]
    opts = {"isolation": isolation, "timeout": args.timeout, "memory_mb": args.memory,
            "nb_timeout": args.notebook_timeout, "nb_memory_mb": args.notebook_memory,
            "notebooks": not args.no_notebooks}
    if not args.quiet:
        _say(f"course grade: {len(subs)} submission(s), {skipped} already graded, {len(todo)} to grade; "
             f"chapters {', '.join(numbers)}; isolation {isolation}; jobs {args.jobs}")
    t0 = time.monotonic()

    def record(g: LearnerGrade) -> None:
        book.commit_learner(g.learner, g.fingerprint, g.source, run_id, g.rows, g.feedback)
        if not args.quiet:
            got = sum(r["points"] for r in g.rows)
            possible = sum(r["max_points"] for r in g.rows)
            _say(f"  {g.learner}: {got:g}/{possible:g} ({g.seconds:.1f} s)")

    def failed(sub: Submission, exc: BaseException) -> LearnerGrade:
        rows = [{"chapter": n, "kind": "course_lib", "component": "(grader)", "points": 0.0, "max_points": 0.0,
                 "status": "error", "message": f"the grader failed on this submission ({type(exc).__name__}: {exc})",
                 "isolation": "none"} for n in numbers]
        # Not the learner's fault: recorded so the table shows it, but never counted as finished,
        # so the next run grades this learner again.
        return LearnerGrade(sub.learner, f"retry:{sub.fingerprint}", str(sub.path), rows)

    try:
        if args.jobs <= 1:
            for sub in todo:
                try:
                    record(grade_learner(sub, numbers, opts))
                except Exception as exc:  # noqa: BLE001 - the batch goes on
                    record(failed(sub, exc))
        else:
            ctx = multiprocessing.get_context("spawn")
            with futures.ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx,
                                             initializer=_worker_init) as pool:
                pending = {pool.submit(grade_learner, sub, numbers, opts): sub for sub in todo}
                for fut in futures.as_completed(pending):
                    sub = pending[fut]
                    try:
                        record(fut.result())
                    except Exception as exc:  # noqa: BLE001
                        record(failed(sub, exc))
    except KeyboardInterrupt:
        print("course grade: interrupted; finished learners are saved, run the same command to go on",
              file=sys.stderr)
        export(book, out, numbers)
        book.close()
        return 130
    export(book, out, numbers)
    elapsed = time.monotonic() - t0
    if not args.quiet:
        _say(f"course grade: done in {elapsed:.1f} s; wrote {out / 'grades.csv'}, {out / 'totals.csv'}, "
             f"{out / 'feedback'}/")
    book.close()
    if _CACHE_DIR is not None:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)
    return 0
