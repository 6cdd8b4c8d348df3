"""Planted learners against what the grader reads back (issue 17, points 2, 4 and 5), for
test_results_hostile.py and test_hidden_redaction.py.

A learner's code runs in the grading child's own process, so it can write any bytes to the result pipe
($COURSE_RESULT_FD, frames of ``<IQ`` case index and length, then the payload): the frames below are
written by learner code at import, for every case of its run, before it exits.

* ``bomb_frame``: a torch archive whose storages are DEFLATE members declaring 1000 MiB each (about
  1 MB each on the wire); loaded as it is, it makes the grader allocate 2 GB a frame.
* ``stride0_frame``: a real ``torch.save`` of a one-element storage seen as a 100000 x 100000 view.
* the leakers: exceptions whose text carries the inputs' shape, dtype and first values behind every
  prefix the grader once let through on hidden cases, and a class name that carries the shape.
* ``DEEP_NOTEBOOK``: a notebook nested 200,000 levels deep.
* ``big_manifest_zip``: a correct submission whose manifest lists 100 members of 20 MiB each.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import signal
import time
import zipfile
from pathlib import Path

from .planted import REFERENCE, _prefix

MARKER = "LEAK7F3Q"  # in every leaker's message: no hidden case's row may show it


def bomb_frame(declared: int = 1000 * 2**20, members: int = 2) -> bytes:
    """A result frame whose ``members`` storages are DEFLATE-compressed and declare ``declared`` bytes each."""
    import collections
    import io
    import pickle
    import zipfile

    import torch

    class Storage:
        def __init__(self, key: str) -> None:
            self.key = key

    class Tensor:
        def __init__(self, key: str) -> None:
            self.key = key

        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2,
                    (Storage(self.key), 0, (declared,), (1,), False, collections.OrderedDict()))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.ByteStorage, obj.key, "cpu", declared) if isinstance(obj, Storage) else None

    pickled = io.BytesIO()
    Pickler(pickled, protocol=2).dump({"kind": "outputs",
                                       "outputs": {f"out{k}": Tensor(str(k)) for k in range(members)}})
    out = io.BytesIO()
    zeros = b"\0" * 2**20
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("archive/data.pkl"), pickled.getvalue())
        zf.writestr(zipfile.ZipInfo("archive/byteorder"), "little")
        zf.writestr(zipfile.ZipInfo("archive/version"), "3\n")
        for k in range(members):
            with zf.open(f"archive/data/{k}", "w", force_zip64=True) as fh:
                for _ in range(declared // len(zeros)):
                    fh.write(zeros)
    return out.getvalue()


def stride0_frame() -> bytes:
    """A real torch.save of a record whose output is one float seen as 10^10 (stride 0)."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save({"kind": "outputs", "outputs": {"output": torch.ones(1).expand(100_000, 100_000),
                                               "weights": torch.ones(1).expand(100_000, 100_000)}}, buffer)
    return buffer.getvalue()


def frame_writer(make: str) -> str:
    """attention.py that, at import, writes the frame ``make()`` returns for every case of its run to the
    result pipe, then exits: every case's result is that frame."""
    source = inspect.getsource(bomb_frame if make == "bomb_frame" else stride0_frame)
    return _prefix(source + (
        "def _flood():\n"
        "    import json, os, struct\n"
        "    import course_lib\n"
        "    box = os.path.dirname(os.path.dirname(os.path.abspath(course_lib.__file__)))\n"
        "    with open(os.path.join(box, 'job.json')) as fh:\n"
        "        job = json.load(fh)\n"
        f"    frame = {make}()\n"
        "    fd = int(os.environ['COURSE_RESULT_FD'])\n"
        "    for chapter in job['chapters']:\n"
        "        for case in chapter['cases']:\n"
        "            data = memoryview(struct.pack('<IQ', case['index'], len(frame)) + frame)\n"
        "            while data:\n"
        "                data = data[os.write(fd, data):]\n"
        "    os._exit(0)\n"
        "_flood()\n"))


# ---------------------------------------------------------------- hidden inputs through exception text
_SAYS = "f'" + MARKER + " {query.shape} {query.dtype} {query.flatten()[:3].tolist()}'"
LEAK_NOT_IMPLEMENTED = REFERENCE + (
    "\n\ndef scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n"
    f"    raise NotImplementedError({_SAYS})\n")
LEAK_CHECK_FAILURE = REFERENCE + (
    "\n\ndef scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n"
    "    from course_lib.provided.checking import CheckFailure\n"
    f"    raise CheckFailure('not run: ' + {_SAYS})\n")
# Every prefix the grader once passed through, and the texts it once kept a part of, in turn; and an
# exception class whose name is the shape.
MIMICS = ["not implemented yet", "missing result", "the probe returned", "not run:", "did not finish",
          "the grading process", "the result ", "no result", "called sys.exit(", "course_lib/{d}.py is missing",
          "cannot import {d}.py: SyntaxError at line {n}", "raised {c}"]
LEAK_MIMIC = REFERENCE + (
    "\n\n_CALLS = [0]\n"
    "def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):\n"
    f"    mimics = {MIMICS!r}\n"
    "    shape = '_'.join(str(s) for s in query.shape)\n"
    "    says = " + _SAYS + "\n"
    "    _CALLS[0] += 1\n"
    "    prefix = mimics[_CALLS[0] % len(mimics)]\n"
    "    prefix = prefix.format(d='LEAK7F3Q_' + shape, n=query.shape[-1], c='Shape_' + shape)\n"
    "    if _CALLS[0] % 3 == 0:\n"
    "        raise type('Shape_' + shape + '_LEAK7F3Q', (Exception,), {})(prefix + ' ' + says)\n"
    "    from course_lib.provided.checking import CheckFailure\n"
    "    raise CheckFailure(prefix + ' ' + says)\n")
LEAKERS = {"leak_not_implemented": LEAK_NOT_IMPLEMENTED, "leak_check_failure": LEAK_CHECK_FAILURE,
           "leak_mimic": LEAK_MIMIC}

DEEP_NOTEBOOK = '{"cells": ' + "[" * 200_000 + "]" * 200_000 + ', "nbformat": 4, "nbformat_minor": 5}'


# ---------------------------------------------------------------- a manifest of large members
BIG_MEMBERS, BIG_BYTES = 100, 20 * 2**20


def big_manifest_zip(path: Path) -> None:
    """A correct submission whose manifest lists 100 members of 20 MiB of zeros (DEFLATE: small on disk)."""
    files = {"course_lib/__init__.py": b"", "course_lib/attention.py": REFERENCE.encode()}
    listed = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    block = b"\0" * BIG_BYTES
    digest = hashlib.sha256(block).hexdigest()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for rel, data in files.items():
            zf.writestr(f"{path.stem}/{rel}", data)
        for k in range(BIG_MEMBERS):
            zf.writestr(f"{path.stem}/data/blob_{k:03d}.bin", block)
            listed[f"data/blob_{k:03d}.bin"] = digest
        zf.writestr(f"{path.stem}/manifest.json", json.dumps({"learner": "big_manifest", "files": listed}))


# ---------------------------------------------------------------- a worker that dies (run_batch)
def fake_grade(sub, numbers, opts):
    """A stand-in for grade_learner in a worker: the learner named "killer" kills its worker (SIGKILL, as
    the OOM killer would); every other gets one passing row after a short while."""
    from course_admin.grading.batch import LearnerGrade
    from course_admin.records.rows import GradeRow

    if sub.learner == "killer":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.3)
    return LearnerGrade(sub.learner, sub.fingerprint, str(sub.path),
                        [GradeRow("02", "course_lib", "case", 1.0, 1.0, "pass", "", "bwrap")], chapters=["02"])
