"""A result frame, checked before and after it is loaded: the grader's memory never depends on what a
learner's code wrote.

The sandboxed child sends each case's record as a ``torch.save`` archive (a zip file); the parent
writes it to ``box/out/NNN.pt`` (cold.py). Learner code runs in the same process as the child and
can write any bytes to the result pipe, so a frame is untrusted data. ``read_result`` loads one only
when, before anything is decompressed or unpickled:

* the file is at most ``RESULT_MAX_BYTES``;
* its central directory lists only the names ``torch.save`` writes (``archive_names``: derived from a
  real ``torch.save`` in this process, plus ``<archive>/data/<N>``), each once, every member *stored*
  (not compressed: a DEFLATE member declaring 1000 MiB is 1 MB on the wire) with its declared size
  equal to its stored size, their sum under the limit, the pickle under ``PICKLE_MAX_BYTES``; each
  member's local header agrees (same name, stored);
* the pickle (``data.pkl``, read as opcodes, never run) names no global beyond what a record of
  tensors needs: ``torch._utils._rebuild_tensor_v2``, a typed storage, ``collections.OrderedDict``
  (a sparse or quantized tensor, whose invariants a crafted file can break, is refused).

After ``torch.load(weights_only=True)`` every object is plain data (dict, list, tuple, str, int,
float, bool, None, tensors), at most ``MAX_DEPTH`` deep and ``MAX_ITEMS`` many, and every tensor is a
dense, contiguous CPU tensor whose elements fit in its storage (no stride-0 view that makes four bytes
look like a terabyte), ``MAX_NUMEL`` elements in all. Only then does verdict.py compare anything.

A refusal's reason (``ResultRefused``) is the grader's own wording: it quotes nothing from the frame.
"""
from __future__ import annotations

import functools
import io
import pickletools
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

import torch

RESULT_MAX_BYTES = 4 * 1024**2    # = cold.Limits.result_bytes: one frame on disk, and all it declares
PICKLE_MAX_BYTES = 1024**2        # a record's pickle: a few keys and a message of 600 characters
MAX_MEMBERS = 1024
MAX_NUMEL = RESULT_MAX_BYTES      # elements of every tensor of one frame together
MAX_DEPTH = 8
MAX_ITEMS = 10_000
ALLOWED_GLOBALS = re.compile(r"torch\._utils _rebuild_tensor_v2|collections OrderedDict|torch [A-Z][A-Za-z0-9]*Storage")
REFUSED_OPCODES = {"STACK_GLOBAL", "INST", "EXT1", "EXT2", "EXT4"}  # globals that the scan below cannot name
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zip local file header: signature ... name length, extra length


class ResultRefused(ValueError):
    """A frame that is not what the grading child writes; the message says why, in the grader's words."""


@functools.lru_cache(maxsize=None)
def archive_names() -> tuple[str, frozenset[str]]:
    """(archive folder, the fixed member names) of what ``torch.save`` writes here, from a real save of a
    record like the child's; storages are ``<folder>/data/<N>`` beside them."""
    buffer = io.BytesIO()
    torch.save({"kind": "outputs", "outputs": {"x": torch.ones(2)}}, buffer)
    names = zipfile.ZipFile(io.BytesIO(buffer.getvalue())).namelist()
    folder = names[0].split("/", 1)[0]
    return folder, frozenset(n for n in names if not re.fullmatch(re.escape(folder) + r"/data/\d+", n))


def _check_archive(path: Path, max_bytes: int = RESULT_MAX_BYTES) -> bytes:
    """The frame's pickle, once its zip structure is what torch.save writes; else ResultRefused."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ResultRefused(f"the result file is larger than {max_bytes >> 20} MiB")
    folder, fixed = archive_names()
    storage = re.compile(re.escape(folder) + r"/data/\d{1,9}")
    try:
        with open(path, "rb") as fh, zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise ResultRefused(f"the result archive has more than {MAX_MEMBERS} members")
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise ResultRefused("the result archive names a member twice")
            if any(n not in fixed and not storage.fullmatch(n) for n in names):
                raise ResultRefused("the result archive holds a member that torch.save does not write")
            if any(i.compress_type != zipfile.ZIP_STORED or i.file_size != i.compress_size for i in infos):
                raise ResultRefused("the result archive holds a compressed member (torch.save stores them)")
            if sum(i.file_size for i in infos) > max_bytes:
                raise ResultRefused(f"the result archive declares more than {max_bytes >> 20} MiB")
            for info in infos:
                _check_local_header(fh, info, size)
            pickled = next((i for i in infos if i.filename == f"{folder}/data.pkl"), None)
            if pickled is None or pickled.file_size > PICKLE_MAX_BYTES:
                raise ResultRefused("the result archive has no pickle of a record, or one too large")
            return zf.read(pickled)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, struct.error) as exc:
        if isinstance(exc, ResultRefused):
            raise
        raise ResultRefused(f"the result is not a readable zip archive ({type(exc).__name__})") from None


def _check_local_header(fh: Any, info: zipfile.ZipInfo, size: int) -> None:
    """The member's local header (which a zip reader may trust instead) says the same: stored, same name."""
    if info.header_offset + _LOCAL_HEADER.size > size:
        raise ResultRefused("a member of the result archive lies outside the file")
    fh.seek(info.header_offset)
    head = _LOCAL_HEADER.unpack(fh.read(_LOCAL_HEADER.size))
    method, name_length = head[3], head[9]
    name = fh.read(name_length).decode("utf-8", "replace")
    if head[0] != b"PK\x03\x04" or method != zipfile.ZIP_STORED or name != info.filename:
        raise ResultRefused("a member's local header disagrees with the archive's directory")


def _check_pickle(data: bytes) -> None:
    """Every global the pickle names is one a record of dense tensors needs (opcodes read, nothing run)."""
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in REFUSED_OPCODES:
                raise ResultRefused("the record's pickle refers to objects in a way torch.save does not")
            if opcode.name == "GLOBAL" and not ALLOWED_GLOBALS.fullmatch(str(arg)):
                raise ResultRefused("the record's pickle names an object other than dense tensors")
    except ResultRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed pickle, whatever genops makes of it
        raise ResultRefused(f"the record's pickle is malformed ({type(exc).__name__})") from None


def check_loaded(record: Any, max_numel: int = MAX_NUMEL) -> None:
    """Plain data only, bounded, and every tensor dense, contiguous and within its storage."""
    numel, items = 0, 0
    stack: list[tuple[Any, int]] = [(record, 0)]
    while stack:
        obj, depth = stack.pop()
        items += 1
        if depth > MAX_DEPTH or items > MAX_ITEMS:
            raise ResultRefused("the record is nested too deeply or holds too many objects")
        if isinstance(obj, dict):
            if not all(type(k) is str for k in obj):
                raise ResultRefused("the record has a key that is not a string")
            stack += [(v, depth + 1) for v in obj.values()]
        elif type(obj) in (list, tuple):
            stack += [(v, depth + 1) for v in obj]
        elif type(obj) is torch.Tensor:
            numel += _check_tensor(obj)
            if numel > max_numel:
                raise ResultRefused(f"the record's tensors hold more than {max_numel} elements")
        elif obj is not None and type(obj) not in (str, int, float, bool):
            raise ResultRefused("the record holds an object that is not plain data")


def _check_tensor(t: torch.Tensor) -> int:
    """The tensor's number of elements, once it is dense, on the CPU, contiguous and inside its storage."""
    if t.layout != torch.strided or t.device.type != "cpu" or t.is_quantized or t.is_nested:
        raise ResultRefused("the record holds a tensor that is not a dense CPU tensor")
    if not t.is_contiguous():
        raise ResultRefused("the record holds a tensor that is a strided view (e.g. stride 0), not its values")
    size = t.element_size()
    if (t.storage_offset() + t.numel()) * size > t.untyped_storage().nbytes():
        raise ResultRefused("the record holds a tensor larger than its storage")
    return t.numel()


def read_result(path: Path, max_bytes: int = RESULT_MAX_BYTES) -> Any:
    """The record in the frame at ``path``: checked (module docstring), loaded, checked again. ``max_bytes``:
    the frame's bound, and its tensors' elements together (verify.py's frames of weights are larger)."""
    _check_pickle(_check_archive(path, max_bytes))
    try:
        record = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - torch's own refusal of a frame that passed the checks
        raise ResultRefused(f"the result could not be loaded ({type(exc).__name__})") from None
    check_loaded(record, max(MAX_NUMEL, max_bytes // 4))
    return record
