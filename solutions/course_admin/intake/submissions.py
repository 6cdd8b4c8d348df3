"""Find submissions (zips, folders, folders of those), name their learner, fingerprint them, read files safely.

A submission (what `course submit` writes, or a folder collected by nbgrader) holds
    manifest.json            learner, chapter, created, sha256 of each file, versions
    course_lib/<module>.py   the learner's files
    chNN_<name>.ipynb        the chapter's notebook
either at its root, under one top folder (a zip of a folder), or under ``course_submission/``
(the layout `course submit --into` leaves beside the notebook in an nbgrader assignment folder).

The learner id is what the instructor collected: the zip's or folder's name (``zoé_ch02.zip`` -> ``zoé``,
NFC-normalised, Unicode kept), or for nbgrader's ``submitted/<student>/<assignment>/`` the student folder.
Never the manifest, which the learner writes: a manifest naming someone else is a warning row. Two
submissions under one id are an error row each. On disk (feedback files) an id is ``disk_name(id)``.

Nothing here imports or runs learner code. Symlinks, absolute or ``..`` paths and oversized members
are refused: a submission can only supply bytes, never point at another file on this machine.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from course_lib.provided.i18n import _, said

from .names import MAX_ID_CHARS, collected_as, collected_chapter, disk_name, learner_id

MAX_FILE_BYTES = 2 * 1024**2
MAX_NOTEBOOK_BYTES = 20 * 1024**2
MAX_MEMBERS = 2000
MAX_ZIP_BYTES = 128 * 1024**2        # a collected zip, hashed whole by every run
FINGERPRINT_MAX_BYTES = 64 * 1024**2  # a folder's files hashed by content; beyond, by size and time


class SubmissionError(Exception):
    """A submission that cannot be graded; the message goes into the learner's grade rows, in their language:
    an English template and its fields, ``SubmissionError("the zip has {count} entries", count=n)`` (i18n.said)."""

    def __init__(self, message: str, **fields: object) -> None:
        super().__init__(said(message, **fields))
        self.english = self.args[0].english


@dataclass
class Submission:
    learner: str
    path: Path
    chapter: str | None = None   # the chapter it was collected for ("02"), or None: every chapter graded
    fingerprint: str = ""
    error: str | None = None
    manifest: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


IDENTITY_WARNING = "manifest.json names the learner"  # the start of that warning (Gradescope leaves it out)
def _looks_like_submission(d: Path) -> bool:
    return any((d / n).exists() for n in ("manifest.json", "course_lib", "course_submission")) or \
        any(p.suffix == ".ipynb" for p in d.iterdir() if p.is_file())


def discover(paths: list[str | Path]) -> list[Submission]:
    """Every submission named by ``paths`` (sorted by path); bad ones carry ``error``, none is dropped."""
    found: list[Submission] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            found.append(Submission(learner_id(p.name), p, error=_("no such file or folder: {path}").format(path=p)))
        elif p.is_file() or p.is_symlink():
            found.append(Submission(learner_id(p.name), p))
        elif _looks_like_submission(p):
            found.append(Submission(collected_as(p.absolute()), p))
        else:  # a folder of submissions; nbgrader's submitted/<learner>/<assignment>/ also works
            for child in sorted(p.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    if _looks_like_submission(child):
                        found.append(Submission(collected_as(child.absolute()), child))
                    else:  # nbgrader's student folder: one submission per assignment folder
                        inner = [c for c in sorted(child.iterdir()) if c.is_dir() and _looks_like_submission(c)]
                        if inner:
                            found += [Submission(learner_id(child.name), c) for c in inner]
                        else:
                            found.append(Submission(learner_id(child.name), child,
                                                    error=_("no submission in this folder (no manifest.json, "
                                                            "course_lib/ or notebook)")))
                elif child.suffix.lower() == ".zip":
                    found.append(Submission(learner_id(child.name), child))
    found = _unique_paths(found)
    found.sort(key=lambda s: str(s.path))
    for sub in found:
        sub.chapter = collected_chapter(sub.path.absolute())
        if sub.error is None:
            _inspect(sub)
    _collisions(found)
    return found


def _unique_paths(subs: list[Submission]) -> list[Submission]:
    """A path named twice on the command line (or inside a folder also named) is one submission."""
    seen: set[str] = set()
    out = []
    for sub in subs:
        key = os.path.realpath(sub.path)
        if key not in seen:
            seen.add(key)
            out.append(sub)
    return out


def _clash(group: list[Submission]) -> bool:
    """Submissions of one learner clash when two are for the same chapter, or one is for every chapter."""
    parts = [s.chapter for s in group]
    return len(group) > 1 and (None in parts or len(set(parts)) < len(parts))


def _collisions(subs: list[Submission]) -> None:
    """Two submissions collected under one learner id (or one feedback file name) for the same chapter
    are both error rows, each under its own key ``<id> (collision: <path>)``: neither is graded as that
    learner, none is skipped. One submission per chapter (``zoe_ch02.zip``, ``zoe_ch03.zip``) is fine."""
    groups: dict[str, list[Submission]] = {}
    for sub in subs:
        groups.setdefault(disk_name(sub.learner), []).append(sub)
    for group in groups.values():
        if not _clash(group):
            continue
        ids = sorted({s.learner for s in group})
        listed = ", ".join(str(s.path) for s in group)
        what = (_("the learner id {id}").format(id=repr(ids[0])) if len(ids) == 1 else
                _("the learner ids {ids}").format(ids=", ".join(map(repr, ids))))
        for sub in group:
            sub.error = _("{count} submissions are collected under {what} ({listed}); none of them is graded: give "
                          "each learner's submission its own file or folder name and grade again").format(
                              count=len(group), what=what, listed=listed)
            sub.learner = f"{sub.learner} (collision: {sub.path})"


# ---------------------------------------------------------------- reading files from a zip or a folder
class Reader:
    """Read-only access to one submission's files by relative POSIX path (root located as above)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip: zipfile.ZipFile | None = None
        self.members: dict[str, zipfile.ZipInfo] = {}
        if path.is_symlink():
            raise SubmissionError("the submission is a symbolic link")
        if path.is_file():
            size = path.stat().st_size
            if size > MAX_ZIP_BYTES:
                raise SubmissionError("the zip is {size} MiB, more than the {limit} MiB a submission may be: hand "
                                      "in your course_lib and notebook only", size=size >> 20, limit=MAX_ZIP_BYTES >> 20)
            try:
                self.zip = zipfile.ZipFile(path)
                infos = self.zip.infolist()
            except (zipfile.BadZipFile, OSError, ValueError) as exc:
                raise SubmissionError("unreadable zip file ({type}: {error})", type=type(exc).__name__,
                                      error=exc) from None
            if len(infos) > MAX_MEMBERS:
                raise SubmissionError("the zip has {count} entries, more than {limit}", count=len(infos),
                                      limit=MAX_MEMBERS)
            for info in infos:
                name = info.filename
                pure = PurePosixPath(name)
                if info.is_dir():
                    continue
                if name.startswith("/") or ".." in pure.parts or "\\" in name:
                    raise SubmissionError("the zip holds an unsafe path: {name}", name=repr(name))
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    continue  # symlinks are never followed nor extracted
                self.members[str(pure)] = info
            names = list(self.members)
        elif path.is_dir():
            names = []
            for root, dirs, files in os.walk(path, followlinks=False):
                dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
                for f in files:
                    full = os.path.join(root, f)
                    names.append(os.path.relpath(full, path).replace(os.sep, "/"))
                if len(names) > MAX_MEMBERS:
                    raise SubmissionError("the folder has more than {limit} files", limit=MAX_MEMBERS)
        else:
            raise SubmissionError("not a zip file or a folder")
        self.names = sorted(names)
        self.base = self._find_base()

    def _find_base(self) -> str:
        names = self.names
        for candidate in ("", "course_submission/"):
            if candidate + "manifest.json" in names or any(n.startswith(candidate + "course_lib/") for n in names):
                return candidate
        tops = {n.split("/", 1)[0] for n in names if "/" in n}
        if len(tops) == 1 and all("/" in n for n in names):  # a zip of one folder
            top = tops.pop() + "/"
            for candidate in (top, top + "course_submission/"):
                if candidate + "manifest.json" in names or any(n.startswith(candidate + "course_lib/") for n in names):
                    return candidate
            return top
        return ""

    def exists(self, rel: str) -> bool:
        return rel in self.names

    def size(self, rel: str) -> int:
        """The size ``rel`` declares (the zip's directory, or the file's), without reading it."""
        if self.zip is not None:
            return self.members[rel].file_size
        return os.lstat(self.path / rel).st_size

    def read(self, rel: str, limit: int = MAX_FILE_BYTES) -> bytes:
        if rel not in self.names:
            raise FileNotFoundError(rel)
        if self.zip is not None:
            info = self.members[rel]
            if info.file_size > limit:
                raise SubmissionError("{file} is {size} bytes, more than the {limit} allowed", file=rel,
                                      size=info.file_size, limit=limit)
            with self.zip.open(info) as fh:
                data = fh.read(limit + 1)
        else:
            full = self.path / rel
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                raise SubmissionError("{file} is not a regular file", file=rel)
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(limit + 1)
        if len(data) > limit:
            raise SubmissionError("{file} is more than the {limit} bytes allowed", file=rel, limit=limit)
        return data

    def notebooks(self, chapter: str) -> list[str]:
        """Notebooks for chapter NN (chNN_*.ipynb) in the submission's base folder or the one above it."""
        dirs = {self.base}
        if self.base.endswith("course_submission/"):
            dirs.add(self.base[: -len("course_submission/")])
        out = []
        for n in self.names:
            head, _, name = n.rpartition("/")
            if (head + "/" if head else "") in dirs and re.fullmatch(rf"ch{chapter}[_-].*\.ipynb", name):
                out.append(n)
        return sorted(out)

    def fingerprint(self) -> str:
        """A hash of the submission: a zip's bytes; a folder's names and contents, the contents of at most
        ``FINGERPRINT_MAX_BYTES`` in all (later files by size and modification time), so that a folder
        of large files costs every run a bounded read."""
        h = hashlib.sha256()
        if self.zip is not None:
            with open(self.path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            return "zip:" + h.hexdigest()
        budget = FINGERPRINT_MAX_BYTES
        for rel in self.names:
            full = self.path / rel
            h.update(rel.encode() + b"\0")
            try:
                st = os.lstat(full)
                if stat.S_ISREG(st.st_mode) and st.st_size <= min(MAX_NOTEBOOK_BYTES, budget):
                    with open(full, "rb") as fh:
                        data = fh.read(st.st_size + 1)
                    budget -= len(data)
                    h.update(hashlib.sha256(data).digest())
                else:
                    h.update(f"{stat.S_IFMT(st.st_mode)}:{st.st_size}:{st.st_mtime_ns}".encode())
            except OSError:
                h.update(b"?")
        return "dir:" + h.hexdigest()


def read_manifest(reader: Reader) -> dict:
    rel = reader.base + "manifest.json"
    if not reader.exists(rel):
        return {}
    try:
        data = json.loads(reader.read(rel, 256 * 1024).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SubmissionError("bad manifest.json: not valid JSON ({type}: {error})", type=type(exc).__name__,
                              error=exc) from None
    if not isinstance(data, dict):
        raise SubmissionError("bad manifest.json: expected a JSON object")
    return data


def _inspect(sub: Submission) -> None:
    """The submission's fingerprint, manifest and the learner it claims: cheap, for every submission of
    every run. What its manifest's hashes say is checked only when it is graded (manifest.py)."""
    try:
        reader = Reader(sub.path)
        sub.fingerprint = reader.fingerprint()
        sub.manifest = read_manifest(reader)
    except SubmissionError as exc:
        sub.error = str(exc)
        return
    except OSError as exc:
        sub.error = _("cannot read the submission ({type}: {error})").format(type=type(exc).__name__, error=exc)
        return
    claimed = sub.manifest.get("learner")
    if claimed is not None:
        named = unicodedata.normalize("NFC", str(claimed))[:MAX_ID_CHARS]
        if named != sub.learner:  # the id is the instructor's (the collected name), never the learner's
            sub.warnings.append(said("manifest.json names the learner {named}, but this submission was collected as "
                                     "{learner} and is graded as {learner}", named=repr(named[:80]),
                                     learner=repr(sub.learner)))  # starts with IDENTITY_WARNING
