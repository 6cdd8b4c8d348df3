"""`course` commands for the tests, each forked from a process that has imported torch already.

Every `course grade`, `report`, `check` or `gradescope` a test starts is a new Python that imports torch (through
course_lib/provided/chapters.py): about 2.5 s of CPU here before it does anything, paid about 130 times a
`make test` (solutions/tests/DURATIONS.md, the census). ``run`` gives a test what ``subprocess.run`` on
``python -m course_lib.provided.cli ARGS`` gives it (exit status, output, the same arguments, environment,
folder and time limit), from a child forked by a server that imported torch and numpy once a pytest process
(as the warm sandbox forks its grading children, course_admin/sandbox/warm.py).

What the child gets is what ``python -m`` would give: its own process (its exit status, its own stdin, stdout
and stderr files), the environment and working folder asked for, ``sys.path[0]`` that folder, the module run
as ``__main__``, ``atexit`` handlers run at its end, Python's, numpy's and torch's random generators seeded
afresh, and torch's thread count taken from the environment's OMP_NUM_THREADS (as a fresh process reads it).
Nothing of the course is imported before the fork: every course module is read in the child, after its
environment is set. Where the environment differs from the server's in what Python reads only at its start
(``PYTHON*`` but ``PYTHONPATH``, the locale), or where ``$COURSE_TEST_FORK=0``, ``run`` is ``subprocess.run``
itself. Tests that signal or kill a running command (records/test_report.py, test_grading.py's kill and resume),
that run it as a script (torchrun in capstone/test_training.py) and
the platform tests (the hub, the Gradescope zip run in its container, the exchange loop, a Windows laptop) start
real processes as before.
"""
from __future__ import annotations

import array
import atexit
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MODULE = "course_lib.provided.cli"
# read by Python only when it starts: a child whose environment differs in one is a new process ($PYTHONPATH is
# read again in the child)
STARTUP = ("PYTHON", "LANG", "LC_")
_SERVER: dict[str, Any] = {}

SERVE = r"""
import array, json, os, random, runpy, select, signal, socket, sys, traceback
import numpy, torch  # what every `course` command imports: paid once here

def serve(path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    sys.stdout.write("ready\n"); sys.stdout.flush()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # each request's waiter is reaped by the kernel
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(0, 1):  # the pytest process is gone
            return
        if listener in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                try:
                    wait_for(conn)
                finally:
                    os._exit(0)
            conn.close()

def wait_for(conn):
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 16, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:  # the test gave up before it asked
            return
        data += chunk
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        conn.close()
        command(request, list(fds))
    for fd in fds:
        os.close(fd)
    conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    status = os.waitpid(pid, 0)[1]
    conn.sendall((json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n").encode())

def command(request, fds):
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        if request.get("cpus"):
            os.sched_setaffinity(0, request["cpus"])  # as a preexec_fn would (its children inherit it)
        os.environ.clear()
        os.environ.update(request["env"])
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or THREADS))
        random.seed(); numpy.random.seed(); torch.seed()
        sys.path[:] = [os.getcwd(), *entries(os.environ), *BASE]  # as python -m puts its folder first, then $PYTHONPATH
        sys.argv = ["-m", *request["argv"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    try:
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush(); sys.stderr.flush()
    finally:
        os._exit(code)

def entries(env):
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]

THREADS = torch.get_num_threads()
BASE = [p for p in sys.path[1:] if p not in entries(os.environ)]  # after this server's own '' and $PYTHONPATH
serve(sys.argv[1])
"""


def _server() -> tuple[str, dict[str, str]] | None:
    """This process's server: (its socket's path, the environment it started with); started at the first call."""
    if _SERVER.get("pid") != os.getpid():  # none yet, or one a parent process started
        folder = tempfile.mkdtemp(prefix="course-cli-")
        path = os.path.join(folder, "socket")
        process = subprocess.Popen([sys.executable, "-c", SERVE, path], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, env=dict(os.environ))
        if process.stdout.readline() != b"ready\n":
            process.kill()
            raise RuntimeError("the test's `course` server did not start (see its error above)")
        _SERVER.update(pid=os.getpid(), path=path, env=dict(os.environ), process=process, folder=folder)
        atexit.register(_stop, process, folder)
    return _SERVER["path"], _SERVER["env"]


def _stop(process: subprocess.Popen, folder: str) -> None:
    process.stdin.close()  # the server's end of the loop
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


def _forkable(env: dict[str, str]) -> dict[str, str] | None:
    if os.environ.get("COURSE_TEST_FORK") == "0" or sys.platform != "linux":
        return None
    server = _SERVER.get("env") if _SERVER.get("pid") == os.getpid() else dict(os.environ)
    startup = lambda e: {k: v for k, v in e.items() if k.startswith(STARTUP) and k != "PYTHONPATH"}  # noqa: E731
    return env if startup(env) == startup(server) else None


def run(args: list[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
        input: bytes | str | None = None, timeout: float | None = None, capture_output: bool = False,
        text: bool = False, check: bool = False, stdout: int | None = None,
        stderr: int | None = None, cpus: set[int] | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", "course_lib.provided.cli", *args], ...)``, forked (see the module's
    docstring); the same keyword arguments, return value and exceptions (TimeoutExpired, CalledProcessError).
    ``cpus``: the command and what it starts run on these CPUs alone (``os.sched_setaffinity``)."""
    command = [sys.executable, "-m", MODULE, *args]
    environment = dict(os.environ if env is None else env)
    if _forkable(environment) is None:
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        return subprocess.run(command, cwd=cwd, env=env, input=input, timeout=timeout, check=check, text=text,
                              capture_output=capture_output, stdout=stdout, stderr=stderr, preexec_fn=pin)
    path, _ = _server()
    files = []

    def temporary() -> int:
        handle = tempfile.TemporaryFile()
        files.append(handle)
        return handle.fileno()

    def where(kind: int | None, inherited: int) -> int:
        if capture_output or kind == subprocess.PIPE:
            return temporary()
        if kind == subprocess.DEVNULL:
            files.append(open(os.devnull, "r+b"))
            return files[-1].fileno()
        return inherited if kind is None else kind

    if input is not None:
        data = input.encode() if isinstance(input, str) else input
        fd_in = temporary()
        os.write(fd_in, data)
        os.lseek(fd_in, 0, os.SEEK_SET)
    else:
        fd_in = 0
    fd_out = where(stdout, 1)
    fd_err = fd_out if stderr == subprocess.STDOUT else where(stderr, 2)
    request = {"argv": list(args), "module": MODULE, "cwd": os.path.abspath(cwd or os.getcwd()), "env": environment,
               "cpus": sorted(cpus or ())}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            conn.sendmsg([json.dumps(request).encode() + b"\n"],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd_in, fd_out, fd_err]))])
            lines = _Lines(conn)
            pid = lines.next(None)["pid"]
            try:
                returncode = lines.next(timeout)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)  # as subprocess.run does: the command, not what it started
                lines.next(None)
                out, err = _read(fd_out, fd_err, text, capture_output or stdout == subprocess.PIPE,
                                 capture_output or stderr == subprocess.PIPE)
                raise subprocess.TimeoutExpired(command, timeout, output=out, stderr=err) from None
        out, err = _read(fd_out, fd_err, text, capture_output or stdout == subprocess.PIPE,
                         capture_output or stderr == subprocess.PIPE)
    finally:
        for handle in files:
            handle.close()
    if check and returncode:
        raise subprocess.CalledProcessError(returncode, command, out, err)
    return subprocess.CompletedProcess(command, returncode, out, err)


class _Lines:
    """The server's answers, one JSON object a line."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buffer = conn, b""

    def next(self, timeout: float | None) -> dict[str, Any]:
        self.conn.settimeout(timeout)
        while b"\n" not in self.buffer:
            chunk = self.conn.recv(4096)  # TimeoutError past ``timeout``
            if not chunk:
                raise RuntimeError("the test's `course` server closed the connection before the command ended")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def _read(fd_out: int, fd_err: int, text: bool, want_out: bool, want_err: bool) -> tuple[Any, Any]:
    """What the command wrote to its captured files, as subprocess.run returns it (text: newlines translated)."""
    def read(fd: int, wanted: bool) -> Any:
        if not wanted:
            return None
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        if not text:
            return data
        return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")
    return read(fd_out, want_out), read(fd_err, want_err)
