"""A chapter's exercise launched as Colab, Binder or a JupyterHub launch it, emulated offline: the learners' course
folder published as the workflow publishes it (course_admin/publish/learner.py: the learner tree, zipped), and
chapter 02's launch notebook (course_admin/book/launch_buttons.py: its first cell, then the released notebook)
executed headless by nbclient in a fresh virtual environment that has only what Colab's image has for it (PyTorch,
NumPy, Matplotlib, and Jupyter's kernel: no course, no system site-packages), with the cell's download pointed at the
local zip (a ``file:`` URL; urllib opens it as it opens the published ``https:`` one).

The first launch unpacks the folder into the learner's home (Binder's and a hub's place; Colab's is their Drive,
the same code behind ``google.colab``), installs it and checks the stub: 0 points. The learner's work (the reference,
copied into the folder's course_lib as a learner would write it) then survives a new session: the second launch
leaves the folder alone and scores full marks, every cell of the notebook running. Nothing is downloaded: pip reads
only this machine's package indexes (``file:`` URLs of pip's own configuration), and the kernel's pip none at all.

One virtual environment and one artifact for the module; about a minute, most of it installing PyTorch's wheel.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course_admin.book import launch_buttons
from course_admin.publish import learner
from course_admin.release.learner_tree import INSTRUCTOR_ONLY
from course_lib.provided.layout import LAYOUT, REPO_ROOT

pytestmark = [pytest.mark.install, pytest.mark.slow]

NAME, NUMBER = "ch02_attention", "02"
COLAB_HAS = ["torch==2.13.0", "numpy", "matplotlib", "nbclient", "ipykernel"]
RUN = """
import json, sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, kernel_name="python3", timeout=240, allow_errors=sys.argv[3] == "errors").execute()
nbformat.write(nb, sys.argv[2])
"""
SCORE = ("from course_lib.provided.check import check\nfrom course_lib.provided.checking import total\n"
         "import course_lib, json\nprint('SCORE', json.dumps([*total(check('02')), course_lib.__file__]))")


def local_indexes() -> list[str]:
    """The package indexes on this machine's disk (``file:`` URLs of pip's configuration); [] when there is none."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    return re.findall(r"file://[^\s']+", listed)


def clean_env(**more: str) -> dict[str, str]:
    """This process's environment without its virtual environment, its Python path or the course's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "COURSE_", "JPY_"))}
    return {**env, **more}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The English learners' course folder, published as the workflow does (into a site folder of its own)."""
    site = tmp_path_factory.mktemp("site")
    (zipped,) = learner.publish(REPO_ROOT, site, None, ("en",))
    return zipped


@pytest.fixture(scope="module")
def colab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with what Colab's image has for chapter 02; its python."""
    indexes = local_indexes()
    if not indexes:
        pytest.skip("no package index on this machine's disk: this test downloads nothing")
    venv = tmp_path_factory.mktemp("colab") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = clean_env(PIP_INDEX_URL=indexes[0], PIP_EXTRA_INDEX_URL=" ".join(indexes[1:]))
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", "-c",
                           str(REPO_ROOT / "constraints-cpu.txt"), *COLAB_HAS], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return python


def launch(python: Path, notebook: dict, home: Path, work: Path, errors: bool) -> dict:
    """``notebook`` executed in a new kernel of ``python``'s environment, as a learner whose home is ``home``."""
    source, executed = work / "launched.ipynb", work / "executed.ipynb"
    source.write_text(json.dumps(notebook), encoding="utf-8")
    env = clean_env(HOME=str(home), PIP_NO_INDEX="1", MPLBACKEND="Agg")  # the kernel's pip can download nothing
    done = subprocess.run([str(python), "-c", RUN, str(source), str(executed), "errors" if errors else "strict"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=480)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(executed.read_text(encoding="utf-8"))


def text_of(cell: dict) -> str:
    """What a cell printed and the tracebacks it raised (nbformat keeps a text as a string or a list of lines)."""
    def joined(value: str | list[str]) -> str:
        return value if isinstance(value, str) else "".join(value)
    return "".join(joined(o.get("text", "")) + "".join(o.get("traceback", [])) for o in cell.get("outputs", []))


def test_the_artifact_is_the_learner_tree_and_nothing_of_the_instructor(artifact: Path) -> None:
    with zipfile.ZipFile(artifact) as archive:
        names = archive.namelist()
        shipped = {name: archive.read(name) for name in names}
    assert f"exercises/{NAME}/{NAME}.ipynb" in names and "course_lib/provided/hosted.py" in names
    assert not [n for n in names if n.startswith(INSTRUCTOR_ONLY) or n.startswith((".git/", ".venv/"))]
    reference = {p.read_bytes() for p in LAYOUT.reference.glob("*.py") if p.stat().st_size}
    assert not [n for n, data in shipped.items() if data in reference]
    assert not [n for n, data in shipped.items() if b"### BEGIN SOLUTION" in data]  # no solution block anywhere


def test_the_launched_notebook_scores_the_stub_0_and_the_learners_work_full_marks(
        artifact: Path, colab: Path, tmp_path: Path) -> None:
    released = json.loads((LAYOUT.exercises / NAME / f"{NAME}.ipynb").read_text(encoding="utf-8"))
    notebook = launch_buttons.exercise_notebook(released, artifact.as_uri(), NUMBER)
    notebook["cells"].append({"cell_type": "code", "execution_count": None, "id": "test-score", "metadata": {},
                              "outputs": [], "source": SCORE})
    home = tmp_path / "home"
    home.mkdir()
    course = home / launch_buttons.FOLDER

    first = launch(colab, notebook, home, tmp_path, errors=True)
    setup = text_of(first["cells"][0])
    assert str(course) in setup and "course_lib/" in setup and "hosted.submit" in setup, setup
    earned, possible, where = json.loads(text_of(first["cells"][-1]).split("SCORE", 1)[1])
    assert (earned, Path(where).parent) == (0, course / "course_lib") and possible > 0
    errors = [o["ename"] for c in first["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors and set(errors) == {"NotImplementedError"}  # the stub's, nothing of the set-up

    # the learner's work, written into the folder; then a new session (a disconnect): the folder is kept
    shutil.copyfile(LAYOUT.reference / "attention.py", course / "course_lib" / "attention.py")
    again = launch(colab, notebook, home, tmp_path, errors=False)  # every cell runs
    earned, possible_again, where = json.loads(text_of(again["cells"][-1]).split("SCORE", 1)[1])
    assert earned == possible_again == possible and Path(where).parent == course / "course_lib"
    assert (course / "course_lib" / "attention.py").read_bytes() == (LAYOUT.reference / "attention.py").read_bytes()
