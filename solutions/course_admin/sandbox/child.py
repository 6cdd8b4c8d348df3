"""The grading child: runs *inside* the sandbox, calls the learner's code, writes outputs as plain data.

Copied into each sandbox as ``_grader_child.py`` and started as ``python -I -S _grader_child.py START``
(which first loads the seccomp filter left beside it: ``confine_here``), or imported by the warm sandbox's
fork server (zygote.py), which confines each child it forks the same way and calls ``run(box, start)``. It imports nothing from the grader: only the standard library, torch, the instructor's
``course_lib.provided`` and the chapter spec copied beside it. It never sees expected values.

The job (``job.json``) lists one or more chapters, each with its spec, its inputs (``inputs_chNN.pt``,
weights_only) and its cases numbered across the whole job. For each case from START on it runs the probe
and sends a record: {"kind": "outputs", "outputs": {key: tensor | {"not_tensor": type name}}}
or {"kind": "exception", "message": str}, ``torch.save``d, as one frame (case index, length, payload:
``cold.RESULT_HEADER``) on the pipe whose fd is $COURSE_RESULT_FD; the parent writes it to
``out/NNN.pt``. Nothing is written to disk here: the sandbox folder is read-only. The parent treats a
missing or unreadable result as a failure.
"""
from __future__ import annotations

import io
import json
import os
import struct
import sys

MAX_MESSAGE = 600
HEADER = struct.Struct("<IQ")   # = cold.RESULT_HEADER
MAX_RESULT = 4 * 1024**2 - 4096  # under cold.Limits.result_bytes


class _CappedStream:
    """stdout/stderr replacement: keeps writing to the captured file until ``cap`` bytes, then drops."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.written = fd, cap, 0
        self.encoding = "utf-8"

    def write(self, text: str) -> int:
        data = str(text).encode("utf-8", "replace")
        room = self.cap - self.written
        if room > 0:
            try:
                os.write(self.fd, data[:room])
            except OSError:
                pass
        self.written += len(data)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fd


def _audit(allowed_roots: list[str]):
    """rlimits fallback only: refuse sockets, new processes and files outside the allowed roots."""
    roots = tuple(os.path.realpath(r) + os.sep for r in allowed_roots) + ("/dev/null", "/proc/self/")
    refused = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
               "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
               "os.forkpty", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata"}

    paths_checked = {"open", "os.remove", "os.rmdir", "os.rename", "os.replace", "shutil.rmtree", "os.chmod",
                     "os.chown", "os.link", "os.symlink", "os.truncate", "os.mkdir", "os.utime"}

    def hook(event: str, args: tuple) -> None:
        if event in refused:
            raise PermissionError(f"{event} is not allowed while grading")
        if event in paths_checked and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if not (path + os.sep).startswith(roots) and not path.startswith(roots):
                raise PermissionError(f"opening {path} is not allowed while grading")
    return hook


def _record(actual: object, describe, tensor_type: type) -> dict:
    """A probe's result as plain data: tensors copied to the CPU, anything else named by its type."""
    if isinstance(actual, BaseException):
        try:  # in English (what the spec's RAISES patterns match), and as the learner reads it
            message, shown = describe(actual, str), describe(actual)
        except BaseException:  # noqa: BLE001
            message = shown = f"raised {type(actual).__name__}"
        return {"kind": "exception", "message": str(message)[:MAX_MESSAGE], "shown": str(shown)[:MAX_MESSAGE]}
    if not isinstance(actual, dict):
        return {"kind": "not_dict", "type": type(actual).__name__}
    outputs: dict[str, object] = {}
    for key, value in actual.items():
        key = str(key)[:100]
        if type(value) is tensor_type:
            try:
                outputs[key] = value.detach().to("cpu").clone().contiguous()
            except BaseException as exc:  # noqa: BLE001
                outputs[key] = {"not_tensor": f"Tensor that cannot be copied ({type(exc).__name__})"}
        elif isinstance(value, tensor_type):
            outputs[key] = {"not_tensor": f"{type(value).__name__} (a Tensor subclass)"}
        else:
            outputs[key] = {"not_tensor": type(value).__name__}
    return {"kind": "outputs", "outputs": outputs}


def _sender(fd: int, save):
    """send(index, record): one frame on the result pipe; an oversized record becomes an exception record."""
    write = os.write  # taken before learner code runs

    def send(index: int, record: dict) -> None:
        buffer = io.BytesIO()
        save(record, buffer)
        data = buffer.getvalue()
        if len(data) > MAX_RESULT:
            buffer = io.BytesIO()
            save({"kind": "exception", "message": f"the result is larger than {(MAX_RESULT + 4096) >> 20} MiB"}, buffer)
            data = buffer.getvalue()
        frame = memoryview(HEADER.pack(index, len(data)) + data)
        while frame:
            frame = frame[write(fd, frame):]
    return send


def run(box: str, start: int) -> int:
    """Every case of the job in ``box`` (its ``job.json``) from case ``start`` on; the exit code."""
    with open(os.path.join(box, "job.json"), encoding="utf-8") as fh:
        job = json.load(fh)
    # -I -S: no site, no .pth files, no script folder; the box (which always holds course_lib/) comes first.
    sys.path[:0] = [box, job["site_packages"]]
    sys.stdout = _CappedStream(1, job["output_cap"])
    sys.stderr = _CappedStream(2, job["output_cap"])

    import importlib.util

    import torch

    from course_lib.provided import checking  # the instructor's copy, in the sandbox
    from course_lib.provided.loader import Impl

    impl = Impl("course_lib", "learner")
    describe = checking._describe_exception
    run_probe = checking.run_probe
    send = _sender(int(os.environ["COURSE_RESULT_FD"]), torch.save)  # before learner code can replace torch.save
    tensor_type = torch.Tensor
    chapters = []  # (cases, probes, inputs) of each chapter, loaded before any learner code runs
    for chapter in job["chapters"]:
        name = f"course_spec_ch{chapter['chapter']}"
        module_spec = importlib.util.spec_from_file_location(name, os.path.join(box, chapter["spec"]))
        spec = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = spec
        module_spec.loader.exec_module(spec)
        inputs = torch.load(os.path.join(box, chapter["inputs"]), weights_only=True)
        chapters.append((chapter["cases"], dict(spec.PROBES), inputs))

    if job.get("audit"):
        sys.addaudithook(_audit([box, job["python_prefix"], job["site_packages"]]))

    send(job["ready_index"], {"kind": "ready"})  # setup done: from here on, learner code runs

    class _Case:  # run_probe needs only .probe
        def __init__(self, probe: str) -> None:
            self.probe = probe

    for cases, probes, inputs in chapters:
        for item in cases:
            index = item["index"]
            if index < start:
                continue
            try:
                actual = run_probe(probes, _Case(item["probe"]), impl, inputs[item["local"]])
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt from learner code too
                actual = exc
            send(index, _record(actual, describe, tensor_type))
    return 0


def confine_here(folder: str) -> None:
    """The cold way: load the seccomp filter the grader left beside this file (``_grader_filter.bpf``, with
    ``_grader_confine.py``) and become undumpable, before any learner code. No filter there: the grader
    found none could be set here, and said so."""
    program = os.path.join(folder, "_grader_filter.bpf")
    if not os.path.exists(program):
        return
    import importlib.util

    module_spec = importlib.util.spec_from_file_location("_grader_confine", os.path.join(folder, "_grader_confine.py"))
    confine = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(confine)
    with open(program, "rb") as fh:
        confine.load_filter(fh.read())
    confine.dumpable(False)


if __name__ == "__main__":
    confine_here(os.path.dirname(os.path.abspath(__file__)))
    code = run(os.path.dirname(os.path.abspath(__file__)), int(sys.argv[1]))
    sys.stdout.flush()
    os._exit(code)  # skip interpreter shutdown: learner atexit handlers and threads do not run
