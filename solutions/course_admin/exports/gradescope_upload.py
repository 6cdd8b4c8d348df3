"""What Gradescope's container holds, read for `course gradescope run`: the upload, its learner, the
container's memory, and where learner code may run.

An upload comes in one of the shapes learners really hand in (each is a test in test_gradescope.py):

    the zip `make submit CH=NN` wrote    its files at the top: manifest.json, course_lib/*.py (no
                                         __init__.py), the notebook; or any zip `course grade` reads
    its files, uploaded one by one       Gradescope lays them flat: attention.py, manifest.json, ...
    a folder                             course_lib/ at the top of the upload, or one folder holding it

``stage`` turns each into what `course grade` reads, under the learner's name. The name is Gradescope's
(its metadata's user id or email): in a container of its own, one upload, it only labels the rows.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from course_lib.provided.i18n import _

from ..intake.submissions import MAX_ZIP_BYTES, SubmissionError, learner_id

# Docker's cgroup files for the container's own memory limit (cgroup v2, then v1)
MEMORY_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
NO_LIMIT = 1 << 60  # what cgroup v1 reports for "no limit" is about 2**63; anything this large is none
NOTEBOOK = ".ipynb"


def learner_of(root: Path) -> str:
    """The learner as Gradescope knows them: submission_metadata.json's first user's id, else email.

    Gradescope's metadata gives each user an email, an id and a name (no sid); then the file is made
    readable by root alone, since its ``previous_submissions`` hold earlier results, hidden ones too."""
    meta = root / "submission_metadata.json"
    try:
        users = json.loads(meta.read_text(encoding="utf-8")).get("users") or [{}]
        who = str(users[0].get("id") or users[0].get("email") or users[0].get("sid") or "learner")
    except (OSError, ValueError, AttributeError):
        who = "learner"
    try:
        os.chmod(meta, 0o600)
    except OSError:
        pass
    return who


def _visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX")


def stage(folder: Path, work: Path, learner: str, chapter: str) -> Path:
    """The upload in ``folder``, as `course grade` reads it: work/subs/<learner>.zip (one zip uploaded
    alone) or work/subs/<learner>/ (a folder with course_lib/ at its top). Raises SubmissionError with
    the sentence the learner reads when the upload holds nothing to grade or is too large."""
    subs = work / "subs"
    subs.mkdir(parents=True)
    name = learner_id(learner).replace("/", "_").replace("\\", "_").lstrip(".") or "learner"
    hint = _("upload the zip `make submit CH={chapter}` wrote (it ends in _ch{chapter}.zip)").format(chapter=chapter)
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
    if size > MAX_ZIP_BYTES:
        raise SubmissionError("the upload holds {size} MB, more than the {limit} MiB a submission may have: {hint}",
                              size=f"{size / 1e6:.0f}", limit=MAX_ZIP_BYTES >> 20, hint=hint)
    entries = _visible(folder)
    zips = [p for p in entries if p.is_file() and p.suffix.lower() == ".zip"]
    top = folder
    dirs = [p for p in entries if p.is_dir() and not p.is_symlink()]
    if not (folder / "course_lib").is_dir() and len(dirs) == 1 and (dirs[0] / "course_lib").is_dir():
        top = dirs[0]  # a folder uploaded whole (its name is not the learner's: Gradescope says who)
    loose = [p for p in _visible(top) if p.is_file() and p.suffix == ".py"]
    target = subs / name
    if (top / "course_lib").is_dir():
        shutil.copytree(top, target, symlinks=True)  # links are kept as links, and refused by the reader
    elif loose:  # files uploaded one by one: the modules go back into course_lib/, as `course submit` put them
        (target / "course_lib").mkdir(parents=True)
        for p in _visible(top):
            if p.is_file() and not p.is_symlink():
                shutil.copyfile(p, target / ("course_lib" if p.suffix == ".py" else "") / p.name)
    elif len(zips) == 1:
        shutil.copyfile(zips[0], subs / f"{name}.zip")
        return subs / f"{name}.zip"
    elif zips:
        raise SubmissionError("the upload holds {count} zips ({names}): {hint}", count=len(zips),
                              names=", ".join(z.name for z in zips)[:200], hint=hint)
    else:
        found = ", ".join(p.name for p in entries)[:200] or _("nothing")
        raise SubmissionError("no submission: the upload holds no course_lib files (it holds {found}); {hint}",
                              found=found, hint=hint)
    return target


def container_memory_bytes() -> int | None:
    """The container's memory limit in bytes, from its cgroup (v2, then v1); None when it has none or
    none can be read."""
    for path in MEMORY_FILES:
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < NO_LIMIT:
            return int(text)
        if text == "max":
            return None
    return None
