"""Autograde one learner's chapter notebook with nbgrader, safely.

``grade_notebook`` is called by ``course grade`` once per learner and chapter. It runs nbgrader 0.9's
autograde in a private course directory (its own ``gradebook.db``, its own ``source/`` copy of the
instructor's notebook, ``submitted/<learner>/<assignment>/``) inside a worker subprocess
(``nb_worker.py``) with a hard wall-clock limit, and reads the scores back. It never raises: a submission
that cannot be graded gives ``NotebookGrade(error=...)`` and zero points.

The parts:

* this module: the public API, the per-process cache of the instructor's generated assignment, the
  kernel's view of the repository, and running the worker (on expiry of the limit, its process group and
  every descendant are killed: ``procs.kill_tree``);
* ``nb_cells.py``: the pure parts (grade plan, hidden lines, scrubbing, decoding the learner's notebook,
  reconciling its cells with the release);
* ``nb_feedback.py``: the learner's feedback page (never nbgrader's, which prints hidden tests);
* ``nb_worker.py`` and ``nb_execute.py``: the worker process, nbgrader's configuration, the kernel.

The kernel runs under the isolation ``procs.detect()`` chooses (``bwrap`` or ``rlimits``, the same names
and the same ``COURSE_GRADE_ISOLATION`` switch as the course_lib sandbox); ``NotebookGrade.isolation``
records which.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from course_lib.provided.layout import LAYOUT, chapter_number

from . import procs
from .nb_cells import grade_plan, hidden_lines, load_learner_notebook, scrub, tail
from .nb_feedback import feedback_html


SOURCE_ROOT = LAYOUT.sources

DEFAULT_CELL_TIMEOUT_S = 60
DEFAULT_MEMORY_MB = 4096
NO_COURSE_LIB = ("the submission has no course_lib package, so nothing of yours could be imported; "
                 "every test that uses course_lib fails")


@dataclass
class CellGrade:
    name: str
    points: float
    max_points: float
    status: str  # "pass", "fail", "needs manual grading" or "error"
    message: str


@dataclass
class NotebookGrade:
    cells: list[CellGrade]
    error: str | None
    feedback_html: str | None
    isolation: str  # what the kernel ran (or would have run) under: "bwrap" or "rlimits"; "none" if unknown

    @property
    def points(self) -> float:
        return sum(c.points for c in self.cells)

    @property
    def max_points(self) -> float:
        return sum(c.max_points for c in self.cells)


# ----------------------------------------------------------------------------------------- public API
def find_source_notebook(chapter: str, source_root: Path = SOURCE_ROOT) -> Path:
    """The instructor's nbgrader source notebook of a chapter: solutions/source/chNN_*/chNN_*.ipynb."""
    number = chapter_number(chapter)
    folders = sorted(p for p in source_root.glob(f"ch{number}_*") if p.is_dir())
    if not folders:
        raise FileNotFoundError(f"no nbgrader source folder for chapter {number} under {source_root}")
    notebooks = sorted(p for p in folders[0].glob("*.ipynb") if not p.name.startswith("."))
    if len(notebooks) != 1:
        raise FileNotFoundError(f"{folders[0]} should hold exactly one .ipynb, found {len(notebooks)}")
    return notebooks[0]


def grade_notebook(
    notebook: Path,
    snapshot: Path,
    chapter: str,
    workdir: Path,
    timeout_s: int = 120,
    *,
    cell_timeout_s: int = DEFAULT_CELL_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    source_notebook: Path | None = None,
    isolation: str | None = None,
) -> NotebookGrade:
    """Autograde one learner's notebook against the instructor's source; never raises.

    notebook: the learner's submitted .ipynb; snapshot: a folder whose ``course_lib/`` is the only one the
    kernel may import; workdir: a fresh scratch folder; timeout_s: hard limit for the whole notebook;
    cell_timeout_s: limit per cell (a cell over it fails and the kernel is restarted); memory_mb: the
    kernel's address-space limit; source_notebook: the nbgrader source (default:
    solutions/source/chNN_*/*.ipynb); isolation: "bwrap" or "rlimits" (default: ``procs.detect()``).
    """
    chosen = "none"
    try:
        chosen = procs.detect(isolation or "auto")
        return _grade(Path(notebook), Path(snapshot), chapter, Path(workdir), int(timeout_s),
                      int(cell_timeout_s), int(memory_mb), source_notebook, chosen)
    except Exception as exc:  # noqa: BLE001 - never raise into the batch
        msg = f"internal grader error ({type(exc).__name__}: {exc}); the notebook was not graded"
        return NotebookGrade([], msg, feedback_html([], msg, chapter, set()), chosen)


@dataclass
class _Context:
    """What every grade of one notebook shares: the plan, the hidden lines, the chapter, the isolation."""
    plan: list[tuple[str, float, bool]]
    hidden: set[str]
    chapter: str
    isolation: str

    def grade(self, cells: list[CellGrade], error: str | None = None) -> NotebookGrade:
        return NotebookGrade(cells, error, feedback_html(cells, error, self.chapter, self.hidden), self.isolation)

    def failed(self, reason: str) -> NotebookGrade:
        return self.grade([CellGrade(gid, 0.0, pts, "error", reason) for gid, pts, _ in self.plan], reason)


def _grade(notebook: Path, snapshot: Path, chapter: str, workdir: Path, timeout_s: int,
           cell_timeout_s: int, memory_mb: int, source_notebook: Path | None, isolation: str) -> NotebookGrade:
    source = Path(source_notebook) if source_notebook else find_source_notebook(chapter)
    source_nb = json.loads(source.read_text(encoding="utf-8"))
    ctx = _Context(grade_plan(source_nb), hidden_lines(source_nb), chapter, isolation)
    learner_nb, problem = load_learner_notebook(notebook)
    if learner_nb is None:
        return ctx.failed(problem)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        template = _template(source, timeout_s)
    except TemplateError as exc:
        return ctx.failed(str(exc))
    shutil.copytree(template, workdir / "course")
    (workdir / "learner.ipynb").write_text(json.dumps(learner_nb), encoding="utf-8")
    job = {
        "mode": "grade", "course": str(workdir / "course"), "assignment": source.parent.name,
        "notebook": source.stem, "learner": str(workdir / "learner.ipynb"),
        "snapshot": str(_kernel_root(snapshot, workdir / "kernel_root")), "isolation": isolation,
        "cell_timeout_s": max(1, min(cell_timeout_s, timeout_s)), "memory_mb": memory_mb,
        "result": str(workdir / "result.json"), "repo_root": str(LAYOUT.root),
    }
    rc, log = _run_worker(workdir, job, timeout_s)
    if rc == "timeout":
        return ctx.failed(f"the notebook did not finish within {timeout_s} s and was stopped; "
                          "look for a loop that never ends or ignores interrupts (or, if every learner gets "
                          f"this, a kernel that cannot start under the {memory_mb} MB memory limit)")
    if not (workdir / "result.json").is_file():
        return ctx.failed("autograde failed before producing grades: " + tail(log))
    result = json.loads((workdir / "result.json").read_text(encoding="utf-8"))
    if result.get("error"):
        return ctx.failed(result["error"])
    note = None if (snapshot / "course_lib").is_dir() else NO_COURSE_LIB
    return ctx.grade([_cell_grade(gid, pts, manual, result["cells"].get(gid), note, ctx.hidden)
                      for gid, pts, manual in ctx.plan])


def _cell_grade(gid: str, pts: float, manual: bool, r: dict | None, note: str | None,
                hidden: set[str]) -> CellGrade:
    if r is None:
        return CellGrade(gid, 0.0, pts, "error", "this cell was not graded")
    message = scrub(r["message"], hidden)
    if note and not manual and r["status"] != "pass":
        message = (note + ". " + message).strip()
    return CellGrade(gid, float(r["points"]), pts, r["status"], message)


# -------------------------------------------------------------------------- the instructor's template
class TemplateError(Exception):
    """The instructor's source notebook could not be turned into a gradebook."""


_TEMPLATES: dict[str, tuple[Path, str]] = {}


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _template(source: Path, timeout_s: int) -> Path:
    """A course folder with the chapter's source notebook, its release and a gradebook that knows it.

    ``nbgrader generate_assignment`` costs a few seconds, so it runs once per source notebook and
    process; each learner gets a copy. The copy is checked against a digest kept in this process's
    memory, so nothing a learner's code writes to disk can change what the next learner is graded by.
    """
    data = source.read_bytes()
    key = hashlib.sha256(data + source.parent.name.encode()).hexdigest()
    if key in _TEMPLATES:
        path, digest = _TEMPLATES[key]
        if path.is_dir() and _digest(path) == digest:
            return path
        del _TEMPLATES[key]
    build = Path(tempfile.mkdtemp(prefix=f"{procs.TEMPLATE_PREFIX}{os.getpid()}-"))  # swept once we are gone
    atexit.register(shutil.rmtree, build, True)
    course = build / "course"
    (course / "source" / source.parent.name).mkdir(parents=True)
    (course / "source" / source.parent.name / source.name).write_bytes(data)  # the notebook alone
    job = {"mode": "prepare", "course": str(course), "assignment": source.parent.name,
           "notebook": source.stem, "result": str(build / "result.json"), "repo_root": str(LAYOUT.root)}
    rc, log = _run_worker(build, job, max(timeout_s, 120))
    result = build / "result.json"
    outcome = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
    if rc != 0 or not outcome.get("ok"):
        raise TemplateError("the instructor's source notebook could not be processed by nbgrader "
                            "generate_assignment: " + (outcome.get("error") or tail(log)))
    _TEMPLATES[key] = (course, _digest(course))
    return course


def _kernel_root(snapshot: Path, root: Path) -> Path:
    """What the kernel sees as the course repository: a copy of the learner's course_lib, and the
    instructor's public chapter specs and reference outputs (``course_lib.provided`` finds them beside
    ``course_lib``); never the learner's copy of those, which could be doctored."""
    root.mkdir(parents=True)
    if (snapshot / "course_lib").is_dir():
        shutil.copytree(snapshot / "course_lib", root / "course_lib", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for sub, pattern in (("specs", "*.py"), ("reference", "*.pt")):
        folder = LAYOUT.root / "tests" / sub
        if folder.is_dir():
            (root / "tests" / sub).mkdir(parents=True, exist_ok=True)
            for path in folder.glob(pattern):
                shutil.copyfile(path, root / "tests" / sub / path.name)
    return root


# ------------------------------------------------------------------------------------ the worker process
def _worker_env(workdir: Path) -> dict[str, str]:
    env = {
        # nbgrader runs the `alembic` command when it creates a gradebook: the interpreter's bin/ first
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(workdir / "home"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # the connection file is written to TMPDIR: it must be inside the kernel's sandbox
        "TMPDIR": str(workdir / "run" / "tmp"),
        "JUPYTER_PATH": str(workdir / "jupyter"),
        "JUPYTER_CONFIG_DIR": str(workdir / "jupyter_config"),
        "JUPYTER_DATA_DIR": str(workdir / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(workdir / "run"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "IPYTHONDIR": str(workdir / "run" / "ipython"),
        "MPLCONFIGDIR": str(workdir / "run" / "mpl"),
        "MPLBACKEND": "Agg",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
    }
    for d in ("home", "jupyter", "jupyter_config", "run", "run/tmp"):
        (workdir / d).mkdir(parents=True, exist_ok=True)
    return env


def _run_worker(workdir: Path, job: dict, timeout_s: int) -> tuple[int | str, str]:
    """Run ``nb_worker`` on ``job`` (written to workdir/job.json); (exit status or "timeout", its log).

    Whatever happens, the worker's process group and every descendant are killed before this returns."""
    (workdir / "job.json").write_text(json.dumps(job), encoding="utf-8")
    log_path = workdir / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "course_admin.nb_worker", str(workdir / "job.json")],
            cwd=str(workdir), env=_worker_env(workdir), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            rc: int | str = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            procs.kill_tree(proc.pid)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    return rc, log_path.read_text(encoding="utf-8", errors="replace")
