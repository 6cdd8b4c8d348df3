"""Planted submissions for solutions/tests/grading/test_grading_holes.py: who a submission belongs to, what a
learner's code can write, how many processes it can start, and what reaches a spreadsheet.

Expected scores are named, not listed: "full" (every case passes: points == max_points on each row of the
table), "no_scale" (the not-divided-by-√d_k mistake: the same vector as the planted learner
``no_scale_ref``) or "zero". The chapter's case list is read from the grade table, so these hold
whatever cases chapter 02 has.
"""
from __future__ import annotations

import json
import unicodedata
import zipfile
from pathlib import Path

from .planted import NO_SCALE, REFERENCE, _prefix

# A loop writing 15 MiB files wherever it can: the working folder (/sandbox), HOME, /tmp, the root,
# /dev/shm and the results folder. It stops itself at 320 MiB so that a broken sandbox cannot fill the
# test machine's disk, and if it wrote more than 128 MiB in all it fails at import (every case 0):
# under bubblewrap only the 64 MiB /tmp is writable.
DISK_FILLER = _prefix(
    "import os as _os\n"
    "_written, _block = 0, b'\\0' * (15 * 2**20)\n"
    "for _where in ('.', _os.environ.get('HOME', '.'), '/tmp', '/', '/dev/shm', '/sandbox/out', 'out'):\n"
    "    for _i in range(64):\n"
    "        if _written >= 320 * 2**20:\n"
    "            break\n"
    "        try:\n"
    "            with open(_os.path.join(_where, f'fill_{_i:03d}.bin'), 'wb') as _f:\n"
    "                _f.write(_block)\n"
    "            _written += len(_block)\n"
    "        except OSError:\n"
    "            break\n"
    "if _written > 128 * 2**20:\n"
    "    raise RuntimeError(f'wrote {_written >> 20} MiB: the sandbox does not bound the disk')\n")

# Forks children that sleep (each also tries to fork) until fork fails; stops itself at 400 so that a
# missing cap cannot bring the test machine down. More than 200 processes: every case 0.
FORK_BOMB = _prefix(
    "import os as _os, time as _time\n"
    "_forked = 0\n"
    "while _forked < 400:\n"
    "    try:\n"
    "        _pid = _os.fork()\n"
    "    except OSError:\n"
    "        break\n"
    "    if _pid == 0:\n"
    "        try:\n"
    "            _os.fork()\n"
    "        except OSError:\n"
    "            pass\n"
    "        _time.sleep(987654)\n"
    "        _os._exit(0)\n"
    "    _forked += 1\n"
    "if _forked > 200:\n"
    "    raise RuntimeError(f'forked {_forked} processes: no process cap')\n")


_UNHOOK = ("import gc as _gc, types as _types\n"
           "for _o in _gc.get_objects():\n"
           "    if type(_o) is _types.FunctionType and _o.__name__ == 'hook' and _o.__closure__:\n"
           "        for _c in _o.__closure__:\n"
           "            if isinstance(_c.cell_contents, set):\n"
           "                _c.cell_contents.clear()\n"
           "            elif isinstance(_c.cell_contents, tuple):\n"
           "                _c.cell_contents = ('/',)\n")


def audit_bypass(targets: list[Path]) -> str:
    """Switch the rlimits fallback's audit hook off (its closure cells are writable), then append to each
    target; any write that succeeds fails every case at import. Only the uid can stop this."""
    return _prefix(
        _UNHOOK +
        "_wrote = []\n"
        f"for _p in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        with open(_p, 'a') as _f:\n"
        "            _f.write('planted')\n"
        "        _wrote.append(_p)\n"
        "    except OSError:\n"
        "        pass\n"
        "if _wrote:\n"
        "    raise RuntimeError(f'wrote {_wrote}')\n")


NFC_NAME = unicodedata.normalize("NFC", "renée")
NFD_NAME = unicodedata.normalize("NFD", "renée")
assert NFC_NAME != NFD_NAME


def _files(attention: str, manifest_learner: str | None) -> dict[str, str]:
    files = {"course_lib/__init__.py": "", "course_lib/attention.py": attention}
    if manifest_learner is not None:
        files["manifest.json"] = json.dumps({"learner": manifest_learner, "chapter": "02"})
    return files


def _folder(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def _zip(path: Path, files: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in sorted(files.items()):
            zf.writestr(f"{path.stem}/{rel}", text)


def write_class(root: Path, write: bool = True) -> tuple[list[Path], dict[str, dict]]:
    """The holes batch: (paths to pass to `course grade`, {learner id: what the table must say});
    ``write=False`` only names them."""
    subs = root / "submissions"
    expect: dict[str, dict] = {}
    _folder_, _zip_ = (_folder, _zip) if write else (lambda *a: None, lambda *a: None)

    def folder(name: str, attention: str, manifest: str | None = None, **what) -> None:
        _folder_(subs / name, _files(attention, name if manifest is None else manifest))
        expect[unicodedata.normalize("NFC", name)] = what

    def zipped(name: str, attention: str, **what) -> None:
        _zip_(subs / f"{name}_ch02.zip", _files(attention, name))
        expect[unicodedata.normalize("NFC", name)] = what

    zipped("correct", REFERENCE, score="full")
    folder("victim", REFERENCE, score="full")
    folder("no_scale_ref", NO_SCALE, score="no_scale")
    folder("disk_filler", DISK_FILLER, score="full")
    folder("fork_bomb", FORK_BOMB, score="full")
    # `course submit ch02 --learner zoe` by someone else, under a name that sorts first
    folder("aaa_impostor", NO_SCALE, manifest="zoe", score="no_scale", warning="'zoe'")
    folder("zoe", REFERENCE, score="full")
    # two learners whose names differ only in an accent: two ids, two feedback files
    zipped("zoé", REFERENCE, score="full")
    zipped("zoë", NO_SCALE, score="no_scale")
    # one name typed twice, NFC in a zip and NFD in a folder: one id, so an error row for each
    _zip_(subs / f"{NFC_NAME}_ch02.zip", _files(REFERENCE, NFC_NAME))
    _folder_(subs / NFD_NAME, _files(REFERENCE, NFD_NAME))
    expect[f"{NFC_NAME} (collision: {subs / (NFC_NAME + '_ch02.zip')})"] = {"score": "zero", "collision": True}
    expect[f"{NFC_NAME} (collision: {subs / NFD_NAME})"] = {"score": "zero", "collision": True}
    # a name that a spreadsheet would run
    folder("=1+2", REFERENCE, score="full")
    folder("@SUM(A1)", REFERENCE, score="full")
    # nbgrader's layout: submitted/<student>/<assignment>/, given as the folder of students, and one
    # assignment folder named directly; the student folder is the id, whatever the manifest says
    nb = root / "nbgrader" / "submitted"
    _folder_(nb / "kim" / "ch02_attention", _files(REFERENCE, "not_kim"))
    _folder_(nb / "lee" / "ch02_attention", _files(NO_SCALE, "lee"))
    expect["kim"] = {"score": "full", "warning": "'not_kim'"}
    expect["lee"] = {"score": "no_scale"}
    # a SyntaxError: hidden cases name the file and the line, nothing of the case
    folder("syntax_error", REFERENCE + "\ndef broken(:\n    pass\n", score="zero_or_scan", syntax=True)
    return [subs, nb, nb.parent / "submitted" / "lee" / "ch02_attention"], expect


def secret_reader(secrets: dict[str, list[str]]) -> str:
    """Switch the audit hook off (``audit_bypass``), then try to read the grader's secrets ({what: [paths or
    glob patterns]}) at import; any read that succeeds fails every case, and its public message names what
    was read ("READ prepared")."""
    return _prefix(
        _UNHOOK +
        "import glob as _glob\n"
        "_read = []\n"
        f"for _what, _patterns in {secrets!r}.items():\n"
        "    for _pattern in _patterns:\n"
        "        for _path in _glob.glob(_pattern) or [_pattern]:\n"
        "            try:\n"
        "                with open(_path, 'rb') as _f:\n"
        "                    _f.read(16)\n"
        "                _read.append(_what)\n"
        "            except OSError:\n"
        "                pass\n"
        "if _read:\n"
        "    raise RuntimeError('READ ' + ' '.join(sorted(set(_read))))\n")
