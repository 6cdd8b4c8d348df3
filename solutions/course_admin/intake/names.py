"""A learner's id and a submission's chapter, read from the names the instructor collected (submissions.py).

The learner id is the collected zip's or folder's name (``zoé_ch02.zip`` -> ``zoé``), never the manifest; on disk
(feedback files) an id is ``disk_name(id)``.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

ASSIGNMENT_RE = re.compile(r"ch\d{1,2}[_-].*|course_submission", re.IGNORECASE)
PLAIN_RE = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?")
MAX_ID_CHARS = 100


def learner_id(name: str) -> str:
    """The learner id of a collected zip or folder name: ``zoé_ch02.zip`` -> ``zoé``.

    Unicode is kept, NFC-normalised (the same name typed on two systems is one id); control characters
    become ``_``; the ``_chNN`` suffix that `course submit` adds is dropped."""
    stem = name[:-4] if name.lower().endswith(".zip") else name
    stem = unicodedata.normalize("NFC", stem)
    stem = re.sub(r"[_-]ch\d{1,2}$", "", stem, flags=re.IGNORECASE)
    stem = "".join("_" if unicodedata.category(c)[0] == "C" else c for c in stem).strip()
    return stem[:MAX_ID_CHARS] or "unnamed"


def disk_name(learner: str) -> str:
    """A file-name-safe form of a learner id (feedback/<disk_name>.md): the id itself when it is plain
    lower-case ASCII, else an ASCII slug, ``~`` and a hash of the id. ``~`` never occurs in a plain
    name, so distinct ids never share a file, on case-insensitive file systems too."""
    if PLAIN_RE.fullmatch(learner):
        return learner
    ascii_ = unicodedata.normalize("NFKD", learner).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_).strip("-")[:40] or "learner"
    return f"{slug}~{hashlib.sha256(learner.encode('utf-8')).hexdigest()[:10]}"


def collected_as(path: Path) -> str:
    """The id of a submission the instructor named directly: its own name, or for nbgrader's
    ``submitted/<student>/<assignment>/`` (and ``course_submission/`` inside it) the student folder."""
    p = path
    while p.is_dir() and ASSIGNMENT_RE.fullmatch(p.name) and p.parent != p and p.parent.name:
        p = p.parent
    return learner_id(p.name)


CHAPTER_SUFFIX_RE = re.compile(r"[_-]ch(\d{1,2})(?:\.zip)?$", re.IGNORECASE)
CHAPTER_FOLDER_RE = re.compile(r"ch(\d{1,2})[_-].*", re.IGNORECASE)


def collected_chapter(path: Path) -> str | None:
    """The chapter a submission was collected for, from its name (``zoe_ch02.zip``, ``zoe_ch02/``) or,
    in nbgrader's layout, from its assignment folder (``submitted/zoe/ch02_attention/``)."""
    p = path
    while True:
        for pattern in (CHAPTER_SUFFIX_RE, CHAPTER_FOLDER_RE):
            m = pattern.search(p.name) if pattern is CHAPTER_SUFFIX_RE else pattern.fullmatch(p.name)
            if m:
                return f"{int(m.group(1)):02d}"
        if not (ASSIGNMENT_RE.fullmatch(p.name) and p.parent != p and p.parent.name):
            return None
        p = p.parent
