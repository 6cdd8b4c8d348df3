"""Your course folder in a hosted notebook: Colab, Binder or a JupyterHub, opened from a chapter's launch link.

The launch notebook's first cell (written by the book's build: solutions/course_admin/book/launch_buttons.py) puts
your course folder where your work outlives the runtime (Colab: your Google Drive; Binder, a JupyterHub: your home
folder), unpacked from the course's published copy the first time only, makes its ``course_lib`` importable in this
runtime, and then calls::

    from course_lib.provided import hosted
    hosted.ready("02")      # what the chapter needs that the runtime lacks, where your folder is, check("02")

and, when you are done::

    hosted.submit("02")     # `course submit ch02` with this notebook: the zip lands in the folder's submissions/

Nothing here needs a shell: pip runs as ``sys.executable -m pip``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .i18n import N_, _
from .layout import LAYOUT, Layout, chapter_number

# Hosted runtimes come with PyTorch, NumPy and Matplotlib (Colab's image) or get them here (Binder); a chapter's
# further needs are installed when its notebook is launched (the learner's pyproject.toml says why each is there).
BASE = ("torch", "numpy", "matplotlib")
NEEDS = {"07": ("tqdm", "sacrebleu"), "08": ("tqdm", "snownlp", "scikit-learn", "safetensors")}
INSTALLING = N_("Installing what chapter {number} needs and this runtime lacks: {packages}")
WHERE = N_("Your course folder: {folder} ({kept}). Edit your code in its course_lib/; the checks below run it.")
KEPT = {"colab": N_("on your Google Drive: your work stays there when the runtime disconnects"),
        "home": N_("in your home folder")}
HAND_IN = N_("To hand in chapter {number}, run `hosted.submit(\"{number}\")` in a cell: it saves this notebook "
             "and runs `course submit ch{number}`, which writes the zip to {folder}.")
SAVED = N_("This notebook, as Colab holds it now, saved to {path}")


def requirements(root: Path) -> dict[str, str]:
    """{distribution name, lower case: its requirement} from the course folder's pyproject.toml."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.MULTILINE | re.DOTALL)
    found = re.findall(r'^\s*"([^"]+)"', block.group(1), re.MULTILINE) if block else []
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower(): req for req in found}


def missing(number: str, root: Path) -> list[str]:
    """The requirements chapter ``number`` needs (BASE and its NEEDS) that this runtime has not installed."""
    wanted = requirements(root)
    lacking = []
    for name in (*BASE, *NEEDS.get(number, ())):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            lacking.append(wanted.get(name, name))
    return lacking


def install(packages: list[str], root: Path) -> None:
    """pip-install ``packages`` into this runtime, pinned by the folder's constraints-cpu.txt where it has one."""
    constraints = root / "constraints-cpu.txt"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", *packages]
    if constraints.is_file():
        command[4:4] = ["-c", str(constraints)]
    subprocess.run(command, check=True)


def in_colab() -> bool:
    """Whether this kernel runs in Google Colab."""
    return "google.colab" in sys.modules


def ready(number: str, layout: Layout = LAYOUT) -> list:
    """Install what chapter ``number`` needs, say where the folder is and how to hand in, run its public checks and
    print them as ``course check`` does; return the results."""
    number = chapter_number(number)
    lacking = missing(number, layout.root)
    if lacking:
        print(_(INSTALLING).format(number=number, packages=", ".join(lacking)), flush=True)
        install(lacking, layout.root)
    print(_(WHERE).format(folder=layout.root, kept=_(KEPT["colab" if in_colab() else "home"])))
    print(_(HAND_IN).format(number=number, folder=layout.root / "submissions"))
    from .check import check, table  # after the installs: the checks import torch

    results = check(number)
    print(table(results))
    return results


def this_notebook(number: str, layout: Layout = LAYOUT) -> Path | None:
    """The notebook to hand in: in Colab, the notebook as the browser holds it, saved as the chapter's notebook
    under submissions/ (Colab's copy is in no folder of the runtime); elsewhere the file the kernel runs for
    (JupyterLab's ``JPY_SESSION_NAME``) when it is the chapter's; None: the folder's own."""
    name = layout.exercise_name(number)
    if in_colab() and name:
        from google.colab import _message  # type: ignore[import-not-found]  # Colab's own: the notebook open now

        notebook = _message.blocking_request("get_ipynb", request="", timeout_sec=60)["ipynb"]
        path = layout.root / "submissions" / f"{name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(_(SAVED).format(path=path))
        return path
    session = Path(os.environ.get("JPY_SESSION_NAME", ""))
    if name and session.suffix == ".ipynb" and session.name == f"{name}.ipynb" and session.is_file():
        return session
    return None


def submit(number: str, *more: str, layout: Layout = LAYOUT) -> int:
    """`course submit chNN` on this notebook (``this_notebook``), with ``more`` of its options (``--force``)."""
    from . import submit as submitting

    number = chapter_number(number)
    notebook = this_notebook(number, layout)
    return submitting.main([f"ch{number}", *(["--notebook", str(notebook)] if notebook else []), *more])
