"""Shared by the sandbox tests (test_warm.py, test_confine.py): one hand-made learner run, warm
or cold, and the planted wrong fork servers.

A run grades a learner module ``course_lib/hostile.py``, whose import does the planted harm, with a spec
whose probes call its ``look()`` (what the run sees of the sandbox: other processes, /tmp, System V IPC,
keys, open sockets, the zygote's fds, its own limits, its namespaces), its ``tried()`` (what each call
that the seccomp filter denies answers) or the ``net()`` of the harm ``sends_out`` gives (what sending
out answers, to the listeners of ``listening``).
"""
from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from course_lib.provided.layout import LAYOUT

REPO = LAYOUT.root
SPEC = ("PROBES = {'look': lambda impl, inputs: impl.hostile.look(), 'tried': lambda impl, inputs: impl.hostile.tried(), "
        "'net': lambda impl, inputs: impl.hostile.net()}\n")  # net(): in the harm sends_out() gives

LOOK = '''
import ctypes, os, resource, torch

KEY_NR = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)  # add_key, keyctl


def keys():
    """Keys named left_by_a in the keyrings a run can reach: user, user-session, session, persistent."""
    if KEY_NR is None:
        return 0
    libc = ctypes.CDLL(None)
    persistent = libc.syscall(KEY_NR[1], 22, -1, -2)  # KEYCTL_GET_PERSISTENT, into the process keyring
    return sum(libc.syscall(KEY_NR[1], 10, ring, b"user", b"left_by_a", 0) > 0  # KEYCTL_SEARCH
               for ring in (-4, -5, -3, persistent))

BINDS = {line.split()[4] for line in open("/proc/self/mountinfo") if line.split()[4].startswith("/tmp/")}
LEADS = set()
for _d in BINDS:
    while (_d := os.path.dirname(_d)).startswith("/tmp/"):
        LEADS.add(_d)

MQ_OPEN = {"x86_64": 240, "aarch64": 180}.get(os.uname().machine)


def channels():
    """How many channels an earlier run left open to this one: an abstract unix socket that answers, a POSIX
    message queue (both named left_by_a)."""
    import socket
    found = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect("\\0left_by_a")
            found += sock.recv(16) == b"secret"
        except OSError:
            pass
    if MQ_OPEN is not None:
        found += ctypes.CDLL(None).syscall(MQ_OPEN, b"left_by_a", 0, 0, None) >= 0  # O_RDONLY
    return found


def namespace(kind):
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return -1


def look():
    me, parent = os.getpid(), os.getppid()
    others = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me, parent):
            try:
                state = open(f"/proc/{name}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            others += state != b"Z"
    ipc = sum(len(open(f"/proc/sysvipc/{k}").read().strip().splitlines()) - 1 for k in ("shm", "sem", "msg"))
    sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    zygote_fds = 0  # the zygote's fds (its control socket among them) that this run could open
    for path in [f"/proc/{parent}/mem", f"/proc/{parent}/environ"] + [f"/proc/{parent}/fd/{n}" for n in range(64)]:
        try:
            os.close(os.open(path, os.O_RDONLY))
            zygote_fds += 1
        except OSError:
            pass
    tmp = 0  # what is in /tmp but the folders bubblewrap made to reach a venv under /tmp (a CI clone)
    for root, dirs, files in os.walk("/tmp"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in BINDS]
        tmp += sum(os.path.join(root, n) not in LEADS for n in dirs + files)
    return {"others": torch.tensor(others), "tmp": torch.tensor(tmp),
            "ipc": torch.tensor(ipc), "keys": torch.tensor(keys()), "sockets": torch.tensor(sockets), "zygote_fds": torch.tensor(zygote_fds),
            "nice": torch.tensor(os.getpriority(os.PRIO_PROCESS, 0)),
            "stack": torch.tensor(resource.getrlimit(resource.RLIMIT_STACK)[0]),
            "cpus": torch.tensor(len(os.sched_getaffinity(0))),
            "oom": torch.tensor(int(open("/proc/self/oom_score_adj").read())),
            "as": torch.tensor(resource.getrlimit(resource.RLIMIT_AS)[1]),
            "cpu": torch.tensor(resource.getrlimit(resource.RLIMIT_CPU)[1]),
            "channels": torch.tensor(channels()), "net_ns": torch.tensor(namespace("net")),
            "ipc_ns": torch.tensor(namespace("ipc"))}
'''


TRIED = '''
import ctypes, errno


def tried():
    \"\"\"The errno of each call the seccomp filter denies (0: it worked), made harmless where it could work.\"\"\"
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {
        "ptrace": lambda: libc.ptrace(0, 0, None, None),  # PTRACE_TRACEME: harmless unless signalled
        "process_vm_readv": lambda: libc.process_vm_readv(1, None, 0, None, 0, 0),
        "pidfd_open": lambda: libc.syscall(434, 1, 0),
        "kcmp": lambda: libc.syscall(312, os.getpid(), os.getpid(), 0, 0, 0),
        "add_key": lambda: libc.syscall(248, b"user", b"k", b"v", 1, -4),
        "keyctl": lambda: libc.syscall(250, 0, -4, 0),  # KEYCTL_GET_KEYRING_ID
        "mq_open": lambda: libc.syscall(240, b"tried", 0o100 | 2, 0o600, None),
        "unshare": lambda: libc.unshare(0x10000000),
        "setns": lambda: libc.setns(0, 0),
        "mount": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
        "userfaultfd": lambda: libc.syscall(323, 0),
        "perf_event_open": lambda: libc.syscall(298, None, 0, -1, -1, 0),
        "bpf": lambda: libc.syscall(321, 0, None, 0),
        "io_uring_setup": lambda: libc.syscall(425, 1, None),
        "clone_newuser": lambda: libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0),  # CLONE_NEWUSER | SIGCHLD
        "clone3": lambda: libc.syscall(435, None, 0),
        # fallocate(1, FALLOC_FL_KEEP_SIZE, 0, 4096) on the run's log: 4 KiB where it works
        "fallocate": lambda: libc.syscall(285, 1, 1, ctypes.c_long(0), ctypes.c_long(4096)),
    }
    found = {}
    for name, call in calls.items():
        ctypes.set_errno(0)
        result = call()
        if result == 0 and name == "clone_newuser":
            os._exit(0)  # the child of a clone that worked
        found[name] = torch.tensor(0 if result >= 0 else ctypes.get_errno())
    return found
'''

SENDS_OUT = '''
import socket, torch


def net():
    """0 where the call worked (and sent what it could), else its errno."""
    found = {}
    for name, family, kind in (("inet", socket.AF_INET, socket.SOCK_STREAM), ("udp", socket.AF_INET, socket.SOCK_DGRAM),
                               ("inet6", socket.AF_INET6, socket.SOCK_STREAM),
                               ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                               ("packet", socket.AF_PACKET, socket.SOCK_RAW)):
        try:
            with socket.socket(family, kind) as sock:
                if name == "inet":
                    sock.connect(("127.0.0.1", TCP_PORT))
                    sock.sendall(b"STOLEN")
                elif name == "udp":
                    sock.sendto(b"STOLEN", ("127.0.0.1", UDP_PORT))
            found[name] = 0
        except OSError as exc:
            found[name] = exc.errno
    try:
        socket.socketpair(socket.AF_INET).close()  # the kernel itself refuses it (EOPNOTSUPP) when not filtered
        found["socketpair_inet"] = 0
    except OSError as exc:
        found["socketpair_inet"] = exc.errno
    mine, theirs = socket.socketpair(socket.AF_UNIX)
    mine.sendall(b"ok")
    found["unix_pair"] = int(theirs.recv(2) != b"ok")
    # a worker process and its queues; plain data, since a worker's tensors go through shared memory, which
    # torch sizes with posix_fallocate, and the filter denies fallocate
    try:
        loader = torch.utils.data.DataLoader(range(4), batch_size=2, num_workers=1, collate_fn=list)
        found["dataloader"] = int(list(loader) != [[0, 1], [2, 3]])
    except OSError as exc:
        found["dataloader"] = exc.errno
    return {k: torch.tensor(v) for k, v in found.items()}
'''


def sends_out(tcp: int, udp: int) -> str:
    """A harm whose ``net()`` sends to a TCP and a UDP listener on 127.0.0.1 (``listening``), tries each other
    family a learner might, and checks that what the course needs (an AF_UNIX socketpair, a DataLoader
    worker) still works (test_confine.py)."""
    return SENDS_OUT.replace("TCP_PORT", str(tcp)).replace("UDP_PORT", str(udp))


CLEAN = {"others": 0, "tmp": 0, "ipc": 0, "keys": 0, "sockets": 0, "zygote_fds": 0, "channels": 0}


@pytest.fixture
def warm_cls():
    """make(cls=WarmSandbox, **kw): a warm sandbox, closed after the test."""
    from course_admin.sandbox import procs, warm

    if not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    made = []

    def make(cls=warm.WarmSandbox, **kw):
        made.append(cls(**kw))
        return made[-1]
    yield make
    for w in made:
        w.close()


def run(w, harm: str, wall: float = 30.0, probe: str = "look", isolation: str = "bwrap"):
    """One learner's run in warm sandbox ``w``, or in a sandbox of its own (the cold way, ``isolation``) when
    ``w`` is None: (RunResult, what the probe returned or None, log text)."""
    from course_admin.sandbox import cold, procs

    scratch = None if w is not None else Path(tempfile.mkdtemp(prefix="cold_"))
    box = Path(tempfile.mkdtemp(prefix="run_", dir=w.spool if w is not None else scratch))
    package = box / "course_lib"
    shutil.copytree(LAYOUT.course_lib / "provided", package / "provided",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(LAYOUT.course_lib / "__init__.py", package / "__init__.py")
    (package / "hostile.py").write_text(harm + LOOK + TRIED)
    (box / "tests" / "specs").mkdir(parents=True)
    (box / "tests" / "specs" / "ch99.py").write_text(SPEC)
    torch.save([{}], box / "inputs_ch99.pt")
    _, prefix, site = procs.python_paths()
    (box / "job.json").write_text(json.dumps({
        "site_packages": str(site), "python_prefix": str(prefix), "output_cap": 1 << 20, "audit": False,
        "ready_index": 999, "chapters": [{"chapter": "99", "spec": "tests/specs/ch99.py", "inputs": "inputs_ch99.pt",
                                          "cases": [{"index": 0, "local": 0, "probe": probe}]}]}))
    log = (w.root if w is not None else scratch) / f"{box.name}.log"
    limits = cold.Limits(wall_s=wall, memory_bytes=2 * 1024**3)
    try:
        if w is not None:
            result = w.run(box, 0, limits, log)
        else:
            shutil.copy2(REPO / "solutions" / "course_admin" / "sandbox" / "child.py", box / "_grader_child.py")
            exe, _, _ = procs.python_paths()
            result = cold.run(box, [str(exe), "-I", "-S", "/sandbox/_grader_child.py", "0"], limits, isolation, log)
        out = box / "out" / "000.pt"
        record = torch.load(out, weights_only=True) if out.is_file() else None
        seen = {k: v.tolist() for k, v in record["outputs"].items()} if record and record["kind"] == "outputs" else None
        return result, seen, log.read_text(errors="replace")
    finally:
        shutil.rmtree(scratch or box, ignore_errors=True)


UNFILTERED = ("        confine.load_filter(program)", "        pass")  # a zygote whose children load no filter
SHARED_NAMESPACES = ("        confine.own_namespaces()", "        pass")  # ... or share its network and IPC


def planted_zygote(warm_cls, folder: Path, *changes: tuple[str, str]):
    """A warm sandbox whose fork server has each (line, wrong) replaced: a planted wrong zygote."""
    from course_admin.sandbox import warm

    source = warm.FILES["zygote.py"].read_text()
    for line, wrong in changes:
        assert line in source, line
        source = source.replace(line, wrong, 1)
    (folder / "zygote.py").write_text(source)
    return warm_cls(files={**warm.FILES, "zygote.py": folder / "zygote.py"})


def clean_view(seen: dict) -> dict:
    return {k: seen[k] for k in CLEAN}


@contextlib.contextmanager
def listening() -> Iterator[tuple[int, int, Callable[[], list[bytes]]]]:
    """A TCP and a UDP socket on 127.0.0.1 for a learner to send to: (TCP port, UDP port, received()), where
    received() gives what reached them, one item a connection or a datagram (test_confine, test_gradescope)."""
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(64)
        udp.bind(("127.0.0.1", 0))
        tcp.setblocking(False)
        udp.setblocking(False)

        def received() -> list[bytes]:  # a connection the kernel took waits in the backlog, its data buffered
            got = []
            while True:
                try:
                    conn, _ = tcp.accept()
                except BlockingIOError:
                    break
                with conn:
                    conn.settimeout(5)
                    got.append(b"".join(iter(lambda: conn.recv(1 << 16), b"")))
            while True:
                try:
                    got.append(udp.recv(1 << 16))
                except BlockingIOError:
                    return got

        yield tcp.getsockname()[1], udp.getsockname()[1], received
