"""Autograde one learner's chapter notebook with nbgrader, safely.

``grade_notebook`` is called by ``course grade`` once per learner and chapter. It runs nbgrader 0.9's
autograde in a private course directory (its own ``gradebook.db``, its own ``source/`` copy of the
instructor's notebook, ``submitted/<learner>/<assignment>/``) inside a worker subprocess with a hard
wall-clock limit, and reads the scores back from that gradebook. It never raises: a submission that
cannot be graded gives ``NotebookGrade(error=...)`` and zero points.

What plain ``nbgrader autograde`` does wrong here (seen with 0.9.6), and what this module does about it:

* The learner's snapshot must be the only ``course_lib``. The repository's editable install puts a
  meta-path finder (``__editable__..._finder``) into every interpreter of ``.venv``, which would serve the
  repository's ``course_lib`` to a snapshot that lacks a module. The kernel is started by our own kernel
  spec: ``python -I`` (no PYTHONPATH, no cwd on the path) with a bootstrap that drops the editable finders
  and puts first a finder that resolves ``course_lib`` and its submodules in the snapshot only, failing
  with a clear ``ModuleNotFoundError`` otherwise.
* Autograde copies every non-notebook file of ``source/<assignment>/`` over the submission unless listed in
  ``exclude_overwriting``: our ``source/`` holds the notebook alone, and ``course_lib`` is not in the
  assignment folder at all.
* A deleted test cell is not restored (``OverwriteCells.add_missing_cells`` is off by default, and its
  placement code fails when neighbouring cells are gone too). Before autograde, every nbgrader cell of the
  release is matched by ``grade_id``: missing ones are reinserted, the metadata of present ones is reset to
  the instructor's (so ``grade: false`` or changed points do not stick), instructor cells get the
  instructor's source back, and the learner's message says so.
* ``nbgrader.utils.determine_grade`` fails a cell on any stderr stream (a ``UserWarning`` costs the points).
  nbgrader 0.9's ``IgnorePattern`` preprocessor, which runs right after ``Execute``, removes stderr streams
  matching ``IgnorePattern.pattern``; we set it to match any stderr. Errors are ``error`` outputs, not
  streams, so an exception still fails its cell.
* A cell that swallows ``KeyboardInterrupt`` outlives the interrupt sent on timeout; nbclient then gives up
  waiting for the kernel's idle message and autograde exits 1 for the whole notebook. Our ``Execute``
  subclass interrupts, waits a grace period, then restarts the kernel and records a timeout error in that
  cell; the next cells run in the fresh kernel. A kernel that dies (``os._exit`` in learner code) is
  restarted the same way. The per-cell timeout is a parameter (nbgrader's default of 30 s is too short for
  training cells), and the worker as a whole has a hard limit: on expiry its process group and every
  descendant are killed.
* Bad JSON returns an error grade; a parseable notebook with odd metadata is rebuilt cell by cell
  (cell type, source and a known ``grade_id`` only) so that nbgrader never sees the odd metadata.
* ``generate_feedback`` prints hidden tests in tracebacks. We do not use it: the feedback HTML is our own,
  per cell points and the exception's message only, with any line of a hidden test block scrubbed.
* Learner code runs with the grader's rights. Where bubblewrap works, the kernel runs in it: no network,
  its own PID namespace (nothing survives the kernel), the repository hidden except ``.venv``, the course
  directory and gradebook read-only, only its working directory writable. Elsewhere the worker is a child
  subreaper and kills every descendant when it ends. ``NotebookGrade`` does not say which ran;
  ``isolation()`` does.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path
from typing import Any

from course_lib.provided.layout import LAYOUT, chapter_number

REPO_ROOT = LAYOUT.root
SOURCE_ROOT = LAYOUT.sources

STUDENT_ID = "learner"
KERNEL_NAME = "course-grader"
DEFAULT_CELL_TIMEOUT_S = 60
DEFAULT_MEMORY_MB = 4096
MESSAGE_LIMIT = 600

STATUSES = ("pass", "fail", "needs manual grading", "error")


@dataclass
class CellGrade:
    name: str
    points: float
    max_points: float
    status: str  # one of STATUSES
    message: str


@dataclass
class NotebookGrade:
    cells: list[CellGrade]
    error: str | None
    feedback_html: str | None

    @property
    def points(self) -> float:
        return sum(c.points for c in self.cells)

    @property
    def max_points(self) -> float:
        return sum(c.max_points for c in self.cells)


# ------------------------------------------------------------------------------------------ parent side
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
) -> NotebookGrade:
    """Autograde one learner's notebook against the instructor's source; never raises.

    notebook: the learner's submitted .ipynb; snapshot: a folder whose ``course_lib/`` is the only one the
    kernel may import; workdir: a fresh scratch folder; timeout_s: hard limit for the whole notebook;
    cell_timeout_s: limit per cell (a cell over it fails and the kernel is restarted);
    source_notebook: the nbgrader source (default: solutions/source/chNN_*/*.ipynb).
    """
    try:
        return _grade(Path(notebook), Path(snapshot), chapter, Path(workdir), int(timeout_s),
                      int(cell_timeout_s), int(memory_mb), source_notebook)
    except Exception as exc:  # never raise into the batch
        msg = f"internal grader error ({type(exc).__name__}: {exc}); the notebook was not graded"
        return NotebookGrade(cells=[], error=msg, feedback_html=_feedback_html([], msg, chapter, set()))


def _grade(notebook: Path, snapshot: Path, chapter: str, workdir: Path, timeout_s: int,
           cell_timeout_s: int, memory_mb: int, source_notebook: Path | None) -> NotebookGrade:
    source = Path(source_notebook) if source_notebook else find_source_notebook(chapter)
    source_nb = json.loads(source.read_text(encoding="utf-8"))
    plan = _grade_plan(source_nb)  # [(grade_id, max_points, is_manual)] in notebook order
    hidden = _hidden_lines(source_nb)

    def failed(reason: str, status: str = "error") -> NotebookGrade:
        cells = [CellGrade(gid, 0.0, pts, status, reason) for gid, pts, _ in plan]
        return NotebookGrade(cells=cells, error=reason,
                             feedback_html=_feedback_html(cells, reason, chapter, hidden))

    learner_nb, problem = _load_learner_notebook(notebook)
    if learner_nb is None:
        return failed(problem)
    if not (snapshot / "course_lib").is_dir():
        note = ("the submission has no course_lib package, so nothing of yours could be imported; "
                "every test that uses course_lib fails")
    else:
        note = None

    workdir.mkdir(parents=True, exist_ok=True)
    try:
        template = _template(source, timeout_s)
    except TemplateError as exc:
        return failed(str(exc))
    course = workdir / "course"
    shutil.copytree(template, course)
    assignment = source.parent.name
    nb_name = source.stem
    learner_file = workdir / "learner.ipynb"
    learner_file.write_text(json.dumps(learner_nb), encoding="utf-8")
    kernel_root = _kernel_root(snapshot, workdir / "kernel_root")

    job = {
        "mode": "grade", "course": str(course), "assignment": assignment, "notebook": nb_name,
        "learner": str(learner_file), "snapshot": str(kernel_root),
        "cell_timeout_s": max(1, min(cell_timeout_s, timeout_s)), "memory_mb": memory_mb,
        "result": str(workdir / "result.json"), "repo_root": str(REPO_ROOT),
    }
    (workdir / "job.json").write_text(json.dumps(job), encoding="utf-8")
    rc, log = _run_worker(workdir, timeout_s)
    result_file = workdir / "result.json"
    if rc == "timeout":
        return failed(f"the notebook did not finish within {timeout_s} s and was stopped; "
                      "look for a loop that never ends or ignores interrupts (or, if every learner gets "
                      f"this, a kernel that cannot start under the {memory_mb} MB memory limit)")
    if not result_file.is_file():
        return failed("autograde failed before producing grades: " + _tail(log))
    result = json.loads(result_file.read_text(encoding="utf-8"))
    if result.get("error"):
        return failed(result["error"])

    cells = []
    for gid, pts, manual in plan:
        r = result["cells"].get(gid)
        if r is None:
            cells.append(CellGrade(gid, 0.0, pts, "error", "this cell was not graded"))
            continue
        message = _scrub(r["message"], hidden)
        if note and not manual and r["status"] != "pass":
            message = (note + ". " + message).strip()
        cells.append(CellGrade(gid, float(r["points"]), pts, r["status"], message))
    return NotebookGrade(cells=cells, error=None, feedback_html=_feedback_html(cells, None, chapter, hidden))


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
    build = Path(tempfile.mkdtemp(prefix="course-nbgrader-template-"))
    atexit.register(shutil.rmtree, build, True)
    course = build / "course"
    (course / "source" / source.parent.name).mkdir(parents=True)
    (course / "source" / source.parent.name / source.name).write_bytes(data)  # the notebook alone
    job = {"mode": "prepare", "course": str(course), "assignment": source.parent.name,
           "notebook": source.stem, "result": str(build / "result.json"), "repo_root": str(REPO_ROOT)}
    (build / "job.json").write_text(json.dumps(job), encoding="utf-8")
    rc, log = _run_worker(build, max(timeout_s, 120))
    result = build / "result.json"
    outcome = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
    if rc != 0 or not outcome.get("ok"):
        raise TemplateError("the instructor's source notebook could not be processed by nbgrader "
                            "generate_assignment: " + (outcome.get("error") or _tail(log)))
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
        folder = REPO_ROOT / "tests" / sub
        if folder.is_dir():
            (root / "tests" / sub).mkdir(parents=True, exist_ok=True)
            for path in folder.glob(pattern):
                shutil.copyfile(path, root / "tests" / sub / path.name)
    return root


def _grade_plan(source_nb: dict) -> list[tuple[str, float, bool]]:
    plan = []
    for cell in source_nb.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        if meta.get("grade") and meta.get("grade_id"):
            plan.append((str(meta["grade_id"]), float(meta.get("points", 0)),
                         bool(meta.get("solution")) or cell.get("cell_type") != "code"))
    return plan


def _hidden_lines(source_nb: dict) -> set[str]:
    """Every non-trivial line inside a BEGIN/END HIDDEN TESTS block of the source notebook."""
    lines: set[str] = set()
    for cell in source_nb.get("cells", []):
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        inside = False
        for line in src.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
                continue
            if "END HIDDEN TESTS" in line:
                inside = False
                continue
            if inside and len(line.strip()) >= 6:
                lines.add(line.strip())
    return lines


def _scrub(message: str, hidden: set[str]) -> str:
    """Drop ANSI colours, any line that quotes a hidden test, and cap the length."""
    message = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", message or "")
    kept = []
    for line in message.splitlines():
        if any(h in line for h in hidden):
            kept.append("[a line of a hidden test]")
        else:
            kept.append(line)
    message = "\n".join(kept).strip()
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + " …"
    return message


def _load_learner_notebook(path: Path) -> tuple[dict | None, str]:
    """Parse the learner's notebook and rebuild it from what grading needs: cell type, source, grade_id."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"the notebook could not be read ({exc.strerror or exc})"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, (f"the notebook is not valid JSON ({exc}); it was probably edited as text or saved "
                      "half-way. Open it in Jupyter, save it again and resubmit")
    if isinstance(data, dict) and data.get("nbformat") == 3:
        try:
            import nbformat
            data = json.loads(nbformat.writes(nbformat.reads(raw.decode("utf-8"), as_version=4)))
        except Exception as exc:
            return None, f"the notebook uses the old format 3 and could not be converted ({exc})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "the file is JSON but not a Jupyter notebook (no list of cells)"
    cells = []
    for i, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            continue
        kind = cell.get("cell_type")
        if kind not in ("code", "markdown", "raw"):
            continue
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(s for s in src if isinstance(s, str))
        elif not isinstance(src, str):
            src = ""
        meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        nbg = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
        gid = nbg.get("grade_id") if isinstance(nbg.get("grade_id"), str) else None
        new: dict[str, Any] = {"cell_type": kind, "id": f"c{i:04d}", "metadata": {}, "source": src}
        if gid:
            new["metadata"]["nbgrader"] = {"grade_id": gid}
        if kind == "code":
            new.update(outputs=[], execution_count=None)
        cells.append(new)
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                       "language_info": {"name": "python"}}}
    return nb, ""


def _tail(text: str, n: int = 800) -> str:
    text = text.strip()
    return text[-n:] if text else "(no log)"


# ---------------------------------------------------------------- worker process, hard limit, cleanup
def _run_worker(workdir: Path, timeout_s: int) -> tuple[int | str, str]:
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
    if _no_bwrap():
        env["COURSE_GRADER_NO_BWRAP"] = "1"
    for d in ("home", "jupyter", "jupyter_config", "run", "run/tmp"):
        (workdir / d).mkdir(parents=True, exist_ok=True)
    log_path = workdir / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), "--worker", str(workdir / "job.json")],
            cwd=str(workdir), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc: int | str = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            _kill_tree(proc.pid)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    return rc, log_path.read_text(encoding="utf-8", errors="replace")


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(pid: int) -> None:
    """Freeze and kill ``pid``, its process group and every descendant (in any session)."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        return
    for _ in range(20):
        victims = [pid] + _descendants(pid)
        alive = [p for p in victims if Path(f"/proc/{p}").exists() and not _is_zombie(p)]
        if not alive:
            break
        for p in alive:  # freeze first so nothing forks while we collect
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        victims = [pid] + _descendants(pid)
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.05)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat[stat.rindex(")") + 2] == "Z"
    except (OSError, ValueError, IndexError):
        return True


# ----------------------------------------------------------------------------------------- isolation
_BWRAP: dict[str, bool] = {}


def isolation() -> str:
    """Which isolation the notebook kernel gets on this machine: 'bubblewrap' or 'subreaper'."""
    return "bubblewrap" if _bwrap_works() else "subreaper"


def _no_bwrap() -> bool:
    """Bubblewrap switched off: by this module's switch, or by `course grade --isolation rlimits`."""
    return (os.environ.get("COURSE_GRADER_NO_BWRAP") == "1"
            or os.environ.get("COURSE_GRADE_ISOLATION") == "rlimits")


def _bwrap_works() -> bool:
    if "ok" not in _BWRAP:
        exe = shutil.which("bwrap")
        ok = False
        if exe and not _no_bwrap():
            try:
                ok = subprocess.run(
                    [exe, "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/",
                     "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", sys.executable, "-c", "pass"],
                    capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
        _BWRAP["ok"] = ok
    return _BWRAP["ok"]


# The kernel's first code. argv: -c BOOT <snapshot> <memory bytes> -f <connection file> ...
_BOOT = r"""
import os, sys
snap, mem = sys.argv[1], int(sys.argv[2]); del sys.argv[1:3]
# In bubblewrap's PID namespace our parent is pid 1; ipykernel would read that as "parent gone" and quit.
os.environ.pop('JPY_PARENT_PID', None)
if mem > 0:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
def _install_snapshot_finder(snap):
    from importlib.machinery import PathFinder
    editable = lambda f: str(getattr(f, '__module__', '')).startswith('__editable__')
    sys.meta_path[:] = [f for f in sys.meta_path if not editable(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not editable(h)]
    sys.path_importer_cache.clear()

    class SnapshotOnlyFinder:
        # course_lib comes from the submitted snapshot, or not at all
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != 'course_lib' and not name.startswith('course_lib.'):
                return None
            spec = PathFinder.find_spec(name, [snap] if name == 'course_lib' else list(path or []))
            if spec is None:
                raise ModuleNotFoundError(
                    f"No module named {name!r} in your submitted course_lib", name=name)
            return spec

        @staticmethod
        def invalidate_caches():
            pass

    sys.meta_path.insert(0, SnapshotOnlyFinder)
_install_snapshot_finder(snap)
del _install_snapshot_finder
from ipykernel import kernelapp
kernelapp.launch_new_instance()
"""


def _kernel_argv(job: dict, course: Path) -> tuple[list[str], str]:
    py = sys.executable
    core = [py, "-I", "-c", _BOOT, job["snapshot"], str(int(job["memory_mb"]) * 1024 * 1024),
            "-f", "{connection_file}"]
    if not _bwrap_works():
        return core, "subreaper"
    snap = job["snapshot"]
    run = os.environ["JUPYTER_RUNTIME_DIR"]
    autograded = str(course / "autograded" / STUDENT_ID / job["assignment"])
    argv = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    repo = Path(job["repo_root"])
    if repo.is_dir() and repo != Path("/"):
        argv += ["--tmpfs", str(repo)]  # hide the instructor's repository (solutions, references)
        for keep in sorted({Path(sys.prefix), Path(sys.base_prefix), Path(py).parent.parent}):
            if keep.is_dir() and repo.resolve() in keep.resolve().parents:
                argv += ["--ro-bind", str(keep), str(keep)]  # the interpreter and its packages
    argv += ["--ro-bind", snap, snap, "--ro-bind", str(course), str(course),
             "--bind", run, run, "--bind", autograded, autograded, "--chdir", autograded]
    return argv + core, "bubblewrap"


# ------------------------------------------------------------------------------------------ the worker
def _worker(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    result_path = Path(job["result"])
    if not _bwrap_works():
        try:  # become the reaper of every orphan we leave, so that we can kill them at the end
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except Exception:
            pass
    try:
        result = _autograde(job)
    except Exception as exc:
        import traceback
        traceback.print_exc()
        result = {"error": f"autograde crashed: {type(exc).__name__}: {exc}"}
    finally:
        for p in _descendants(os.getpid()):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    result_path.write_text(json.dumps(result), encoding="utf-8")
    return 0


def _execute_class():
    import asyncio

    from nbclient.exceptions import DeadKernelError
    from nbformat.v4 import new_output
    from nbgrader.preprocessors import Execute
    from traitlets import Float

    from jupyter_client.utils import ensure_async
    from jupyter_core.utils import run_sync

    class GraderExecute(Execute):
        """nbgrader's Execute that survives cells ignoring interrupts and kernels that die."""

        grace_s = Float(3.0, help="seconds to wait after an interrupt before restarting the kernel").tag(config=True)

        async def _restart(self) -> None:
            """Kill the kernel (and, in bubblewrap, everything it started) and start a fresh one.

            A fresh kernel manager and client, not ``restart_kernel``: reconnecting the old client's
            sockets to a restarted kernel sometimes loses the first request and hangs.
            """
            old_km, old_kc = self.km, self.kc
            try:
                old_kc.stop_channels()
            except Exception:
                pass
            try:
                await ensure_async(old_km.shutdown_kernel(now=True))
            except Exception:
                pass
            self.create_kernel_manager()
            await self.async_start_new_kernel()
            await self.async_start_new_kernel_client()

        async def _async_handle_timeout(self, timeout, cell=None):
            self.log.error("Cell timed out after %s s: interrupting", timeout)
            await ensure_async(self.km.interrupt_kernel())
            deadline = time.monotonic() + self.grace_s
            while time.monotonic() < deadline:
                if await ensure_async(self.kc.shell_channel.msg_ready()):
                    self._interrupted = timeout  # the kernel answered the interrupt: its error follows
                    return None
                await asyncio.sleep(0.1)
            self.log.error("Kernel ignored the interrupt: restarting it")
            await self._restart()
            self._restarted = timeout
            return {"content": {"status": "error", "ename": "CellTimeoutError",
                                "evalue": self._timeout_text(timeout), "traceback": []}}

        @staticmethod
        def _timeout_text(timeout) -> str:
            return (f"this cell ran longer than {timeout} s and ignored the interrupt; the kernel was "
                    "restarted, so later cells ran in a fresh kernel")

        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            self._interrupted = self._restarted = None
            try:
                cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            except DeadKernelError:
                if self._restarted is not None:  # the old client noticed the kernel we replaced
                    if not any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
                        cell.outputs.append(new_output("error", ename="CellTimeoutError",
                                                       evalue=self._timeout_text(self._restarted),
                                                       traceback=[]))
                    return cell
                self.log.error("Kernel died in cell %s: restarting it", cell_index)
                cell.outputs.append(new_output(
                    "error", ename="DeadKernelError",
                    evalue="the Python kernel died while running this cell (os._exit, a crash or the memory "
                           "limit); later cells ran in a fresh kernel",
                    traceback=[]))
                await self._restart()
                return cell
            if self._interrupted is not None:  # say why a KeyboardInterrupt happened
                for out in cell.outputs:
                    if out.get("output_type") == "error" and out.get("ename") == "KeyboardInterrupt":
                        out["evalue"] = (f"this cell ran longer than {self._interrupted} s and was "
                                         "interrupted")
            return cell

        # nbclient binds the sync wrapper to its own coroutine: rebind it to ours
        execute_cell = run_sync(async_execute_cell)

    return GraderExecute


def _nbgrader_config(course: Path):
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.CourseDirectory.course_id = "course"
    # only the notebook is ever copied: nothing can overwrite the learner's files
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.py", "course_lib"]
    return c


def _run_converter(cls, c, assignment: str, student: str | None = None) -> dict:
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    coursedir = CourseDirectory(config=c)
    coursedir.assignment_id = assignment
    if student is not None:
        coursedir.student_id = student
    app = cls(coursedir=coursedir, config=c)
    app.force = True
    if hasattr(app, "create_assignment"):
        app.create_assignment = True
    if hasattr(app, "create_student"):
        app.create_student = True
    return capture_log(app)


def _autograde(job: dict) -> dict:
    # jsonschema builds a grammar for the rfc3987 format at import (about 1 s of each worker's start);
    # nothing here validates that format, and jsonschema skips it when the import fails
    sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde, GenerateAssignment
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                        LimitOutput, SaveAutoGrades)

    course = Path(job["course"])
    assignment, nb_name = job["assignment"], job["notebook"]
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    os.chdir(course)
    c = _nbgrader_config(course)
    if job["mode"] == "prepare":
        made = _run_converter(GenerateAssignment, c, assignment)
        if not made["success"]:
            return {"ok": False, "error": _log_errors(made)}
        return {"ok": True}

    release = nbformat.read(course / "release" / assignment / f"{nb_name}.ipynb", as_version=4)
    learner = nbformat.reads(Path(job["learner"]).read_text(encoding="utf-8"), as_version=4)
    notes = _reconcile(learner, release)
    submitted = course / "submitted" / STUDENT_ID / assignment
    submitted.mkdir(parents=True, exist_ok=True)
    nbformat.write(learner, submitted / f"{nb_name}.ipynb")
    (course / "autograded" / STUDENT_ID / assignment).mkdir(parents=True, exist_ok=True)

    argv, _ = _kernel_argv(job, course)
    spec_dir = Path(os.environ["JUPYTER_PATH"]) / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": argv, "display_name": "course grader", "language": "python", "interrupt_mode": "message",
        "env": {"PYTHONHASHSEED": "0"}}), encoding="utf-8")

    GraderExecute = _execute_class()
    c.Autograde.autograde_preprocessors = [GraderExecute, IgnorePattern, ClearMetadataPreprocessor,
                                           LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    c.Autograde.exclude_overwriting = {}
    c.Execute.kernel_name = KERNEL_NAME
    c.Execute.timeout = int(job["cell_timeout_s"])
    c.Execute.startup_timeout = 60
    c.Execute.raise_on_iopub_timeout = False  # a restarted kernel never sends the old cell's idle
    c.Execute.iopub_timeout = 4
    c.IgnorePattern.enabled = True  # off by default: nbconvert skips a disabled preprocessor
    c.IgnorePattern.pattern = r"[\s\S]*"  # any stderr stream: warnings never fail a cell
    c.OverwriteCells.add_missing_cells = False  # we restore missing cells ourselves, robustly
    c.KernelManager.transport = "ipc"  # the kernel has no network; ZeroMQ over unix sockets
    c.KernelManager.ip = str(Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "kernel")
    graded = _run_converter(Autograde, c, assignment, STUDENT_ID)
    if not graded["success"]:
        return {"error": "nbgrader autograde failed on this notebook: " + _log_errors(graded)}

    autograded = nbformat.read(course / "autograded" / STUDENT_ID / assignment / f"{nb_name}.ipynb",
                               as_version=4)
    outputs = {}
    for cell in autograded.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid:
            outputs[gid] = cell
    cells = {}
    with Gradebook(db_url, "course") as gb:
        sub = gb.find_submission_notebook(nb_name, assignment, STUDENT_ID)
        for grade in sub.grades:
            cells[grade.name] = _cell_result(grade, outputs.get(grade.name), notes.get(grade.name, ""))
    return {"cells": cells, "error": None}


def _log_errors(outcome: dict) -> str:
    """The useful part of a failed nbgrader API call: its [ERROR] lines and the exception's last line."""
    log = outcome.get("log") or ""
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]")
              and "see the the above traceback" not in line]
    last = [line for line in log.splitlines() if line.strip() and not line.startswith("[")]
    return _tail("\n".join(errors[:3] + last[-1:]) or outcome.get("error") or "", 700)


def _cell_result(grade, cell, note: str) -> dict:
    max_points = float(grade.max_score)
    auto = grade.auto_score
    manual = grade.manual_score
    if cell is not None and cell.cell_type != "code":
        if auto is not None and not grade.needs_manual_grade:
            return {"points": float(auto), "status": "fail" if auto < max_points else "pass",
                    "message": _join(note, "no answer was written")}
        return {"points": float(manual or 0.0), "status": "needs manual grading",
                "message": _join(note, "written answer: graded by hand")}
    if auto is None:
        return {"points": 0.0, "status": "needs manual grading", "message": _join(note, "graded by hand")}
    points = float(auto)
    errors = [o for o in (cell.outputs if cell is not None else []) if o.get("output_type") == "error"]
    if errors:
        e = errors[-1]
        evalue = str(e.get("evalue", "")).strip()
        msg = f"{e.get('ename', 'Error')}: {evalue}" if evalue else f"{e.get('ename', 'Error')} (no message)"
    elif points < max_points:
        msg = f"{points:g} of {max_points:g} points: the test reported partial credit"
    else:
        msg = ""
    return {"points": points, "status": "pass" if points >= max_points else "fail", "message": _join(note, msg)}


def _normalised(source: str) -> list[str]:
    return [line.rstrip() for line in source.splitlines() if line.strip()]


def _join(a: str, b: str) -> str:
    return " ".join(x for x in (a.strip(), b.strip()) if x)


def _reconcile(learner, release) -> dict[str, str]:
    """Make the learner's notebook carry every nbgrader cell of the release, with the release's metadata.

    Instructor cells (tests, locked text) get the release source back (OverwriteCells then restores the
    hidden tests); missing ones are reinserted after the nearest earlier nbgrader cell that is present.
    Learner cells (solution code and written answers) keep the learner's source. Returns a note per
    grade_id for the learner's feedback.
    """
    import copy

    notes: dict[str, str] = {}
    wanted = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id")]
    wanted_ids = {c.metadata.nbgrader.grade_id for c in wanted}
    seen: set[str] = set()
    kept = []
    for cell in learner.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid and (gid not in wanted_ids or gid in seen):
            cell.metadata.pop("nbgrader", None)  # unknown or duplicate id: an ordinary cell
            gid = None
        if gid:
            seen.add(gid)
        kept.append(cell)
    learner.cells = kept
    index = {c.metadata.nbgrader.grade_id: i for i, c in enumerate(learner.cells)
             if c.metadata.get("nbgrader", {}).get("grade_id")}

    for ref in wanted:
        meta = ref.metadata.nbgrader
        gid = meta.grade_id
        learner_owned = bool(meta.get("solution"))
        if gid in index:
            cell = learner.cells[index[gid]]
            if not learner_owned and _normalised(cell.source) != _normalised(ref.source):
                if meta.get("grade"):
                    notes[gid] = "You had edited this test cell; it was graded as the course wrote it."
                cell.source = ref.source
            if cell.cell_type != ref.cell_type:
                cell.cell_type = ref.cell_type
                if ref.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
                else:
                    cell.pop("outputs", None)
                    cell.pop("execution_count", None)
            cell.metadata = copy.deepcopy(ref.metadata)
            continue
        # missing: insert after the nearest earlier release cell still present
        new = copy.deepcopy(ref)
        if new.cell_type == "code":
            new.outputs, new.execution_count = [], None
        pos = 0
        for earlier in wanted[: wanted.index(ref)][::-1]:
            eid = earlier.metadata.nbgrader.grade_id
            if eid in index:
                pos = index[eid] + 1
                break
        learner.cells.insert(pos, new)
        index = {c.metadata.nbgrader.grade_id: i for i, c in enumerate(learner.cells)
                 if c.metadata.get("nbgrader", {}).get("grade_id")}
        if meta.get("grade"):
            notes[gid] = ("This cell was missing from your notebook; it was restored from the course's copy"
                          + (" (your answer there is empty)." if learner_owned else "."))
    import nbformat
    for cell in learner.cells:  # nbformat 4.5 wants unique cell ids
        cell.pop("id", None)
    learner.nbformat_minor = 4
    nbformat.validate(learner)
    return notes


# ------------------------------------------------------------------------------------------ feedback
def _feedback_html(cells: list[CellGrade], error: str | None, chapter: str, hidden: set[str]) -> str:
    got = sum(c.points for c in cells)
    out = sum(c.max_points for c in cells)
    rows = "\n".join(
        f"<tr class='{escape(c.status.replace(' ', '-'))}'><td>{escape(c.name)}</td>"
        f"<td>{c.points:g} / {c.max_points:g}</td><td>{escape(c.status)}</td>"
        f"<td><pre>{escape(_scrub(c.message, hidden))}</pre></td></tr>"
        for c in cells)
    problem = f"<p class='error'><strong>Not graded:</strong> {escape(_scrub(error, hidden))}</p>" if error else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Feedback: chapter {escape(str(chapter))} notebook</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse;width:100%}}
td,th{{border:1px solid #ccc;padding:.3em .5em;vertical-align:top}}pre{{white-space:pre-wrap;margin:0}}
.pass td:nth-child(3){{color:#1a7f37}}.fail td:nth-child(3),.error td:nth-child(3){{color:#cf222e}}
.error{{color:#cf222e}}</style></head><body>
<h1>Chapter {escape(str(chapter))} notebook: {got:g} / {out:g} points</h1>
{problem}
<table><thead><tr><th>cell</th><th>points</th><th>status</th><th>what happened</th></tr></thead>
<tbody>
{rows}
</tbody></table>
<p>Written answers marked "needs manual grading" are scored by your instructor later.</p>
</body></html>
"""


def grade_to_dict(grade: NotebookGrade) -> dict:
    return asdict(grade)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2]))
    print("usage: notebooks.py --worker JOB.json (internal; use grade_notebook())", file=sys.stderr)
    sys.exit(2)
