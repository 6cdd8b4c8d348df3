"""What one learner's run can take from the grader (issue 26, points 2 and 3), graded for real:

* the disk: a hog that floods its output (100 MiB), tries ``fallocate(FALLOC_FL_KEEP_SIZE)`` on it, and
  floods the result pipe with frames (300 MiB), graded with ``--jobs 2`` beside two correct learners on a
  small scratch disk (a 384 MiB tmpfs as TMPDIR, in a mount namespace of the test's own), takes at most what
  cold.Limits bounds (``results_total`` and the log's head and tail, per run) and leaves the disk as it was;
  the correct learners keep full marks; what its code sees of its output is a pipe, not the grader's path.
  (Before: the log was a file in the scratch folder, up to RLIMIT_FSIZE, and a run's frames took 256 MiB.)
* the CPUs after its last case: code that leaves processes spinning and an exit that never comes (``os._exit``
  replaced) is stopped once every result is in, not at the time limit, and loses nothing.
* the CPUs during its run: however many processes it starts, a run gets one CPU (the cgroup's quota).
* the files of a run, under ``--isolation rlimits`` as root: readable by that run's uid alone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course_lib.provided.layout import LAYOUT

from .. import planted as plant
from .. import sandbox_runs
from ..exports import docker_like
from ..sandbox_runs import warm_cls  # noqa: F401, F811 - the fixture

pytestmark = [pytest.mark.grading]

REPO = LAYOUT.root
MIB = 1 << 20
DISK_MIB = 384

HOG = '''
def _hog():
    import ctypes, os, struct
    libc = ctypes.CDLL(None, use_errno=True)
    said = []
    for fd in (1, 2):
        ctypes.set_errno(0)
        done = libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(1 << 30))  # KEEP_SIZE, 1 GiB
        said.append(f"fallocate({fd})={done}/{ctypes.get_errno()} fd{fd}={os.readlink(f'/proc/self/fd/{fd}')}")
    chunk = b"x" * (1 << 20)
    for _ in range(100):
        try:
            os.write(1, chunk)
        except OSError:
            break
    fd, junk = int(os.environ["COURSE_RESULT_FD"]), b"\\0" * (3 << 20)
    for i in range(100):  # frames under the frame cap, for cases that do not exist
        data = memoryview(struct.pack("<IQ", 500 + i, len(junk)) + junk)
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError:
            break
    return " ".join(said)


_SAID = _hog()


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):
    raise RuntimeError("HOG " + _SAID)
'''

MONITOR = '''
import os, sys, time
folder, out = sys.argv[1], sys.argv[2]
def used():
    s = os.statvfs(folder)
    return (s.f_blocks - s.f_bfree) * s.f_frsize
peak = base = used()
with open(out + ".base", "w") as fh:
    fh.write(str(base))
while not os.path.exists(out + ".stop"):
    peak = max(peak, used())
    time.sleep(0.01)
with open(out, "w") as fh:
    fh.write(f"{base} {peak} {used()}")
'''


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """The hog and two correct learners graded (ch02, --jobs 2) with TMPDIR on a 384 MiB tmpfs."""
    from course_admin.sandbox import procs

    if os.geteuid() != 0 or not docker_like.unshare_works():
        pytest.skip("a small scratch disk needs root and mount namespaces (unshare --mount)")
    root = tmp_path_factory.mktemp("small_disk")
    learners = {name: {"files": {"course_lib/__init__.py": "", "course_lib/attention.py": text}}
                for name, text in {"correct_a": plant.REFERENCE, "hog": plant.REFERENCE + HOG,
                                   "correct_b": plant.REFERENCE}.items()}
    subs = plant.write(learners, root / "subs")
    disk, peak = root / "disk", root / "peak"
    disk.mkdir()
    (root / "monitor.py").write_text(MONITOR)
    grade = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out", str(root / "out"),
             "--timeout", "60", "--chapters", "ch02", "--jobs", "2", "--trust-learners"]
    script = (f"mount -t tmpfs -o size={DISK_MIB}m smalldisk {disk} || exit 97\n"
              f"{sys.executable} {root / 'monitor.py'} {disk} {peak} &\n"
              f"while [ ! -e {peak}.base ]; do sleep 0.05; done\n"
              f"TMPDIR={disk} {' '.join(grade)}\nrc=$?\n"
              f"touch {peak}.stop; wait\nexit $rc\n")
    env = {k: v for k, v in os.environ.items() if k != procs.SWITCH}
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode == 97:
        pytest.skip(f"no tmpfs could be mounted here: {proc.stderr[-300:]}")
    rows: dict[str, list[dict]] = {}
    for r in plant.read_csv(root / "out" / "grades.csv") if (root / "out" / "grades.csv").is_file() else []:
        rows.setdefault(r["learner"], []).append(r)
    base, top, after = (int(x) for x in peak.read_text().split())
    return {"proc": proc, "rows": rows, "base": base, "peak": top, "after": after, "disk": disk}


def test_correct_learners_beside_a_hog_keep_full_marks(small_disk):
    proc, rows = small_disk["proc"], small_disk["rows"]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in ("correct_a", "correct_b"):
        lib = [r for r in rows[name] if r["kind"] == "course_lib"]
        assert lib and all(float(r["points"]) == float(r["max_points"]) for r in lib), \
            [(r["component"], r["message"][:200]) for r in lib if float(r["points"]) < float(r["max_points"])]


def test_a_hog_takes_only_what_the_limits_bound_and_leaves_the_disk_as_it_was(small_disk):
    from course_admin.sandbox import cold

    limits = cold.Limits()
    bound = 2 * (limits.results_total + 2 * limits.output_keep) + 32 * MIB  # two runs at once, and our own files
    grew = small_disk["peak"] - small_disk["base"]
    print(f"scratch disk: {grew / MIB:.1f} MiB at the peak, bound {bound / MIB:.0f} MiB, disk {DISK_MIB} MiB")
    assert bound <= DISK_MIB * MIB // 2, f"the limits let two runs take {bound / MIB:.0f} MiB: not a small disk's"
    assert grew <= bound, f"the runs took {grew / MIB:.0f} MiB of the scratch disk (bound {bound / MIB:.0f} MiB)"
    assert abs(small_disk["after"] - small_disk["base"]) <= MIB, "grading left files on the scratch disk"


def test_a_hog_sees_a_pipe_not_the_graders_paths(small_disk):
    hog = [r for r in small_disk["rows"]["hog"] if r["kind"] == "course_lib"]
    said = [r["message"] for r in hog if "HOG " in r["message"]]
    assert said, [r["message"][:200] for r in hog][:3]
    for text in said:
        assert "fd1=pipe:[" in text and "fd2=pipe:[" in text, text
        assert "fallocate(1)=-1/" in text, f"fallocate on the output worked: {text}"
        assert str(small_disk["disk"]) not in text and "course_grade_" not in text, text


LIMIT_S = 300  # a chapter's time limit here: far above what the work takes, however busy the machine
LINGERER = '''
import os as _os, threading as _threading

def _spin():
    while True:
        pass

for _ in range(4):
    _threading.Thread(target=_spin, daemon=True).start()
try:
    for _ in range(4):
        if _os.fork() == 0:
            _spin()
except PermissionError:  # the rlimits fallback's audit hook refuses os.fork: threads only
    pass
_os._exit = lambda code=0: _spin()  # the child's last call never ends
'''


def _rows(tmp_path: Path, name: str, code: str):
    from course_admin.grading import grade
    from course_admin.intake.submissions import Reader
    from course_admin.records.rows import Options
    from course_admin.sandbox import cold

    (tmp_path / name / "course_lib").mkdir(parents=True)
    (tmp_path / name / "course_lib" / "attention.py").write_text(code, encoding="utf-8")
    work = Path(tempfile.mkdtemp(prefix="bounds_"))
    began = time.monotonic()
    try:
        rows = grade.course_lib_rows(Reader(tmp_path / name), ["02"], Options(
            isolation=cold.detect(), timeout_s=LIMIT_S, notebooks=False), work)["02"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return [(r.component, r.status, r.message) for r in rows], time.monotonic() - began


def _rows_rlimits(tmp_path: Path, name: str, code: str):
    """The same, graded by `course grade --isolation rlimits` as root, in a mount namespace where Python is
    open to the run's uid (docker_like.opening: pyenv under a /root of mode 700 is not)."""
    subs = plant.write({name: {"files": {"course_lib/__init__.py": "", "course_lib/attention.py": code}}},
                       tmp_path / f"subs_{name}")
    scratch = tmp_path / f"open_{name}"
    scratch.mkdir()
    os.chmod(scratch, 0o755)
    grade = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out",
             str(tmp_path / f"out_{name}"), "--timeout", str(LIMIT_S), "--chapters", "ch02", "--isolation", "rlimits",
             "--trust-learners"]
    argv = docker_like.with_python_open(grade, [REPO], scratch)
    began = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - began
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [r for r in plant.read_csv(tmp_path / f"out_{name}" / "grades.csv") if r["kind"] == "course_lib"]
    return [(r["component"], "pass" if float(r["points"]) == float(r["max_points"]) else "fail", r["message"])
            for r in rows], took


def _root_with_namespaces() -> None:
    if os.geteuid() != 0 or not docker_like.unshare_works():
        pytest.skip("the rlimits fallback's own uid needs root and a mount namespace (unshare --mount)")


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["bwrap", "rlimits"])
def test_a_run_that_lingers_after_its_last_case_is_stopped_then(tmp_path: Path, isolation: str) -> None:
    from course_admin.sandbox import cold, warm

    if isolation == "bwrap":
        if cold.detect() != "bwrap":
            pytest.skip("bubblewrap does not work here")
        grade_one = _rows
    else:
        _root_with_namespaces()
        grade_one = _rows_rlimits
    try:
        honest, honest_s = grade_one(tmp_path, "honest", plant.REFERENCE)
        lingering, lingering_s = grade_one(tmp_path, "lingerer", plant._prefix(LINGERER))
    finally:
        warm.shutdown()
    print(f"{isolation}: an honest learner {honest_s:.1f} s, one that lingers {lingering_s:.1f} s "
          f"(ratio {lingering_s / honest_s:.2f}; the time limit is {LIMIT_S} s a chapter, two phases)")
    assert all(status == "pass" for _, status, _ in honest), [r for r in honest if r[1] != "pass"]
    scored = [r for r in lingering if r[0] != "built from scratch"]
    assert all(status == "pass" for _, status, _ in scored), [r for r in scored if r[1] != "pass"]
    # held, the run would end at its time limit; stopped after its last case, it ends when its work is done, that
    # work slowed by the spinning threads it shares its interpreter with (3.5 times here, and more on a busy machine)
    assert lingering_s < LIMIT_S / 2, f"the lingering run held the worker {lingering_s:.0f} s (its time limit)"


DAEMON = '''
import _posixsubprocess as _ps, os as _os
_box = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
_watch = ("j0=$(cksum < @B@/job.json); i=0; while [ $i -lt 1200 ]; do i=$((i+1)); touch @M@/alive; "
          '[ "$(cksum < @B@/job.json)" = "$j0" ] || touch @M@/saw_hidden_job; sleep 0.05; done')
_watch = _watch.replace("@B@", _box).replace("@M@", _MARKS)
_r, _w = _os.pipe()
_ps.fork_exec([b"/bin/sh", b"-c", _watch.encode()], [b"/bin/sh"], True, (), None, [], -1, -1, -1, -1, -1, -1,
              _r, _w, True, True, -1, None, None, None, -1, None, False)  # no audit event; a new session, no env
'''


def test_rlimits_public_phase_daemons_are_gone_before_hidden_inputs_arrive(tmp_path: Path) -> None:
    """A daemon started by a public case (past the audit hook, in a session of its own, with an empty
    environment: no token) never sees the hidden phase's job: the run's cgroup and uid end it first."""
    _root_with_namespaces()
    marks = Path(tempfile.mkdtemp(prefix="daemon_marks_"))
    os.chmod(marks, 0o777)
    try:
        code = plant._prefix(f"_MARKS = {str(marks)!r}\n" + DAEMON)
        rows, _ = _rows_rlimits(tmp_path, "daemon", code)
        assert (marks / "alive").is_file(), "the planted daemon never started: " + repr(rows[:2])
        seen = (marks / "alive").stat().st_mtime
        time.sleep(0.5)
        assert (marks / "alive").stat().st_mtime == seen, "the public phase's daemon is still running"
        assert not (marks / "saw_hidden_job").exists(), "a public-phase daemon saw the hidden phase's job"
    finally:
        shutil.rmtree(marks, ignore_errors=True)


SPINNERS = '''
import os as _os, resource as _resource, signal as _signal, time as _time
_kids = []
for _ in range(6):
    _pid = _os.fork()
    if _pid == 0:
        while True:
            pass
    _kids.append(_pid)
_began = _time.monotonic()
_time.sleep(3)
for _pid in _kids:
    _os.kill(_pid, _signal.SIGKILL)
    _os.waitpid(_pid, 0)
_used = _resource.getrusage(_resource.RUSAGE_CHILDREN)
print(f"SPUN cpu={_used.ru_utime + _used.ru_stime:.2f} wall={_time.monotonic() - _began:.2f}", flush=True)
'''


@pytest.mark.parametrize("warm_way", [True, False], ids=["warm", "cold"])
def test_a_run_gets_one_cpu_however_many_processes_it_starts(warm_cls, warm_way: bool) -> None:
    from course_admin.sandbox import cold, reaper

    probe = reaper.Cgroup(4, 1 << 30, 1.0)
    has_cpu = any(d.parent.name == "cpu" for d in probe.dirs)
    probe.remove()
    if not has_cpu:
        pytest.skip("no writable cgroup cpu controller here: a run's processes are not held to one CPU")
    result, _, log = sandbox_runs.run(warm_cls() if warm_way else None, SPINNERS, wall=60)
    line = next((ln for ln in log.splitlines() if ln.startswith("SPUN ")), None)
    assert line, log[-2000:]
    cpu, wall = (float(part.split("=")[1]) for part in line.split()[1:])
    print(f"six spinning processes: {cpu:.2f} s of CPU in {wall:.2f} s ({cpu / wall:.2f} CPUs; "
          f"{os.cpu_count()} on this machine, Limits.cpus {cold.Limits().cpus})")
    assert cold.Limits().cpus == 1.0
    assert cpu <= 1.25 * wall, f"{cpu:.2f} s of CPU in {wall:.2f} s: more than one CPU"


def test_rlimits_as_root_keeps_a_runs_files_from_other_users(tmp_path: Path) -> None:
    """The box of an rlimits run as root: group-readable by the run's uid only, nothing for other users."""
    from course_admin.sandbox import cold, procs

    if procs.sandbox_uid() is None:
        pytest.skip("not root: learner code runs with the grader's uid (the guide says what that protects)")
    work = Path(tempfile.mkdtemp(prefix="bounds_"))
    box = work / "run_x"
    (box / "course_lib").mkdir(parents=True)
    (box / "course_lib" / "attention.py").write_text("secret = 1\n")
    cold._readable_by_run(box, procs.sandbox_uid())
    for path in [box, *box.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode & 0o007 == 0, f"{path} is open to other users (mode {mode:o})"
        assert path.stat().st_gid == procs.sandbox_uid()
    other = procs.sandbox_uid() + 1  # another grading process's uid
    seen = subprocess.run([*procs.drop_privileges(other), "cat", str(box / "course_lib" / "attention.py")],
                          capture_output=True, text=True)
    assert seen.returncode != 0 and "secret" not in seen.stdout, "another run's uid read this run's code"
    mine = subprocess.run([*procs.drop_privileges(procs.sandbox_uid()), "cat", str(box / "course_lib" / "attention.py")],
                          capture_output=True, text=True)
    shutil.rmtree(work)
    assert "secret" in mine.stdout, f"the run's own uid cannot read its code: {mine.stderr}"
