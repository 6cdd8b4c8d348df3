"""What a submission's manifest says about its files, checked when the submission is graded.

`course submit` lists the sha256 of each file it packs in ``manifest.json``; a file that differs was
changed afterwards (a warning row, never a point lost). The manifest is the learner's: whatever it lists,
the check reads a bounded number of files and bytes, and only for a submission being graded (a run that
skips a finished submission reads none of it).
"""
from __future__ import annotations

import hashlib

from course_lib.provided.i18n import said

from .submissions import MAX_NOTEBOOK_BYTES, Reader, SubmissionError

MANIFEST_MAX_FILES = 64            # files checked against their sha256 (a submission has about 15)
MANIFEST_MAX_BYTES = 48 * 1024**2  # bytes read for that, in all


def manifest_warnings(reader: Reader, manifest: dict) -> list[str]:
    """Warnings for the files listed in ``manifest`` that are missing or changed after `course submit`.

    At most ``MANIFEST_MAX_FILES`` files are read, of at most ``MAX_NOTEBOOK_BYTES`` each and
    ``MANIFEST_MAX_BYTES`` in all (sizes as the zip's directory or the folder gives them, before
    reading); one more warning says what was left unchecked. Each in the learner's language, keeping its English
    (i18n.said: the grade table's key of its row)."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        return []
    warnings, checked, budget = [], 0, MANIFEST_MAX_BYTES
    listed = sorted(files.items(), key=lambda kv: str(kv[0]))
    skipped = []
    for rel, digest in listed:
        full = reader.base + str(rel)
        try:
            size = reader.size(full) if reader.exists(full) else None
        except OSError:
            size = None
        if checked >= MANIFEST_MAX_FILES or (size is not None and (size > MAX_NOTEBOOK_BYTES or size > budget)):
            skipped.append(str(rel))
            continue
        checked += 1
        try:
            data = reader.read(full, min(MAX_NOTEBOOK_BYTES, budget))
        except (FileNotFoundError, SubmissionError, OSError):
            warnings.append(said("{file} is listed in manifest.json but missing or unreadable", file=rel))
            continue
        budget -= len(data)
        if hashlib.sha256(data).hexdigest() != digest:
            warnings.append(said("{file} changed after `course submit` (its sha256 differs from the manifest)",
                                 file=rel))
    if skipped:
        warnings.append(said("manifest.json lists {listed} files: {skipped} of them were not checked against their "
                             "sha256 (at most {files} files, {each} MiB each and {all} MiB in all are read), e.g. "
                             "{examples}", listed=len(listed), skipped=len(skipped), files=MANIFEST_MAX_FILES,
                             each=MAX_NOTEBOOK_BYTES >> 20, all=MANIFEST_MAX_BYTES >> 20,
                             examples=", ".join(skipped[:3])[:200]))
    return warnings
