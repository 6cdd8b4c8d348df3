"""The notebook grader's worker process: nbgrader 0.9 in a private course directory, one job a process.

Started by ``notebooks.py`` as ``python -I -m course_admin.nb_worker JOB.json`` (or by path) with a
scrubbed environment and a hard wall-clock limit; it writes JOB["result"] and exits 0. Two modes:

``prepare``  ``generate_assignment`` of the instructor's source notebook: the release and a gradebook.
``grade``    reconcile the learner's notebook with the release (``nb_cells.reconcile``), autograde it
             with our kernel and ``GraderExecute``, and read each graded cell back from the gradebook.

Why not plain ``nbgrader autograde`` (0.9.6):

* The learner's snapshot must be the only ``course_lib``. The repository's editable install puts a
  meta-path finder (``__editable__..._finder``) into every interpreter of ``.venv``. Our kernel spec starts
  ``python -I`` with a bootstrap (``BOOT``) that drops the editable finders and puts first a finder that
  resolves ``course_lib`` in the snapshot only, failing with a clear ``ModuleNotFoundError`` otherwise.
* Autograde copies every non-notebook file of ``source/<assignment>/`` over the submission unless
  excluded: our ``source/`` holds the notebook alone, and ``course_lib`` is ignored.
* ``determine_grade`` fails a cell on any stderr stream: ``IgnorePattern`` (right after ``Execute``)
  removes every stderr stream. Errors are ``error`` outputs, so an exception still fails its cell.
* Deleted and edited test cells: ``nb_cells.reconcile`` restores them before autograde.
* Learner code runs with the grader's rights. Under ``bwrap`` the kernel runs in bubblewrap: no network,
  its own PID namespace (nothing survives the kernel), the repository hidden except the interpreter, the
  course directory and snapshot read-only, only its working directory writable. Under ``rlimits`` the
  worker is a child subreaper; either way it kills every descendant before it exits.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# absolute imports: this file also runs by path
from course_admin import nb_cells, procs

STUDENT_ID = "learner"
KERNEL_NAME = "course-grader"

# The kernel's first code. argv: -c BOOT <snapshot> <memory bytes> -f <connection file> ...
BOOT = r"""
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


# ---------------------------------------------------------------------------------------- the kernel
def kernel_argv(job: dict, course: Path) -> list[str]:
    """The kernel's command line: the boot code, inside bubblewrap when the job's isolation is bwrap."""
    py = sys.executable
    core = [py, "-I", "-c", BOOT, job["snapshot"], str(int(job["memory_mb"]) * 1024 * 1024),
            "-f", "{connection_file}"]
    if job["isolation"] != "bwrap":
        return core
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
    return argv + core


def _write_kernel_spec(job: dict, course: Path) -> None:
    spec_dir = Path(os.environ["JUPYTER_PATH"]) / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": kernel_argv(job, course), "display_name": "course grader", "language": "python",
        "interrupt_mode": "message", "env": {"PYTHONHASHSEED": "0"}}), encoding="utf-8")


# ---------------------------------------------------------------------------------------- nbgrader
def _nbgrader_config(course: Path):
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.CourseDirectory.course_id = "course"
    # only the notebook is ever copied: nothing can overwrite the learner's files
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.py", "course_lib"]
    return c


def _autograde_config(c, job: dict) -> None:
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                        LimitOutput, SaveAutoGrades)

    from course_admin.nb_execute import GraderExecute

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
    c.OverwriteCells.add_missing_cells = False  # nb_cells.reconcile restores missing cells, robustly
    c.KernelManager.transport = "ipc"  # the kernel has no network; ZeroMQ over unix sockets
    c.KernelManager.ip = str(Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "kernel")


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


def _log_errors(outcome: dict) -> str:
    """The useful part of a failed nbgrader API call: its [ERROR] lines and the exception's last line."""
    log = outcome.get("log") or ""
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]")
              and "see the the above traceback" not in line]
    last = [line for line in log.splitlines() if line.strip() and not line.startswith("[")]
    return nb_cells.tail("\n".join(errors[:3] + last[-1:]) or outcome.get("error") or "", 700)


# ------------------------------------------------------------------------------------------ the jobs
def prepare(job: dict) -> dict:
    """generate_assignment: the release of the source notebook and a gradebook that knows its cells."""
    from nbgrader.converters import GenerateAssignment

    course = Path(job["course"])
    os.chdir(course)
    made = _run_converter(GenerateAssignment, _nbgrader_config(course), job["assignment"])
    return {"ok": True} if made["success"] else {"ok": False, "error": _log_errors(made)}


def _submit(job: dict, course: Path) -> dict[str, str]:
    """Reconcile the learner's notebook with the release and put it where autograde looks."""
    import nbformat

    assignment, nb_name = job["assignment"], job["notebook"]
    release = nbformat.read(course / "release" / assignment / f"{nb_name}.ipynb", as_version=4)
    learner = nbformat.reads(Path(job["learner"]).read_text(encoding="utf-8"), as_version=4)
    notes = nb_cells.reconcile(learner, release)
    submitted = course / "submitted" / STUDENT_ID / assignment
    submitted.mkdir(parents=True, exist_ok=True)
    nbformat.write(learner, submitted / f"{nb_name}.ipynb")
    (course / "autograded" / STUDENT_ID / assignment).mkdir(parents=True, exist_ok=True)
    return notes


def _read_grades(course: Path, assignment: str, nb_name: str, notes: dict[str, str]) -> dict:
    import nbformat
    from nbgrader.api import Gradebook

    path = course / "autograded" / STUDENT_ID / assignment / f"{nb_name}.ipynb"
    outputs = {gid: cell for cell in nbformat.read(path, as_version=4).cells
               if (gid := cell.metadata.get("nbgrader", {}).get("grade_id"))}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "course") as gb:
        sub = gb.find_submission_notebook(nb_name, assignment, STUDENT_ID)
        return {g.name: nb_cells.cell_result(g, outputs.get(g.name), notes.get(g.name, "")) for g in sub.grades}


def grade(job: dict) -> dict:
    """Autograde the learner's notebook; {"cells": {grade_id: cell_result}, "error": None} or an error."""
    from nbgrader.converters import Autograde

    course = Path(job["course"])
    os.chdir(course)
    notes = _submit(job, course)
    _write_kernel_spec(job, course)
    c = _nbgrader_config(course)
    _autograde_config(c, job)
    graded = _run_converter(Autograde, c, job["assignment"], STUDENT_ID)
    if not graded["success"]:
        return {"error": "nbgrader autograde failed on this notebook: " + _log_errors(graded)}
    return {"cells": _read_grades(course, job["assignment"], job["notebook"], notes), "error": None}


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    if job.get("isolation") != "bwrap":
        procs.become_subreaper()  # orphans come to us, so that we can kill them at the end
    # jsonschema builds a grammar for the rfc3987 format at import (about 1 s of each worker's start);
    # nothing here validates that format, and jsonschema skips it when the import fails
    sys.modules.setdefault("rfc3987_syntax", None)
    try:
        result = prepare(job) if job["mode"] == "prepare" else grade(job)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as the notebook's error
        import traceback
        traceback.print_exc()
        result = {"error": f"autograde crashed: {type(exc).__name__}: {exc}"}
    finally:
        procs.kill_descendants(os.getpid())
    Path(job["result"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 2:
        sys.exit(main(sys.argv[1]))
    print("usage: python -I -m course_admin.nb_worker JOB.json (internal; use notebooks.grade_notebook())",
          file=sys.stderr)
    sys.exit(2)
