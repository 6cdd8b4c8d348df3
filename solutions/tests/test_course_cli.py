"""course_cli.run (the tests' forked `course` command) gives what subprocess.run on `python -m` gives: each case runs
a planted ``course_lib/provided/cli.py`` (found first in the working folder, as ``python -m`` finds it) both ways
and compares what came back."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import course_cli

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the forked runner is Linux's (elsewhere: subprocess)")

PLANTED = """import atexit, json, os, random, sys
atexit.register(lambda: print("atexit ran"))
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0], "x": os.environ.get("X"),
                  "stdin": sys.stdin.read() if "stdin" in sys.argv else ""}))
if "threads" in sys.argv:  # a fresh process takes its thread count from $OMP_NUM_THREADS
    import torch; print("threads", torch.get_num_threads())
print("to stderr", file=sys.stderr)
if "boom" in sys.argv:
    raise ValueError("boom")
if "sleep" in sys.argv:
    sys.stdout.flush()
    import time; time.sleep(60)
if "random" in sys.argv:
    import numpy, torch; print(random.random(), numpy.random.random(), torch.rand(1).item())
if "parent" in sys.argv:
    print("parent", os.getppid())
if "cpus" in sys.argv:
    print("cpus", sorted(os.sched_getaffinity(0)))
sys.exit(int(os.environ.get("CODE", "0")))
"""


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    package = tmp_path / "course_lib" / "provided"
    package.mkdir(parents=True)
    for folder in (tmp_path / "course_lib", package):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    (package / "cli.py").write_text(PLANTED, encoding="utf-8")
    return tmp_path


def both(args: list[str], **kw) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    forked = course_cli.run(args, **kw)
    real = subprocess.run([sys.executable, "-m", course_cli.MODULE, *args], **kw)
    return forked, real


@pytest.mark.parametrize("case", ["plain", "code", "environment", "stdin", "boom", "merged"])
def test_the_same_as_a_new_process(planted: Path, case: str) -> None:
    env = {**os.environ, "X": "planted", "OMP_NUM_THREADS": "1", "CODE": "3" if case == "code" else "0"}
    kw: dict = {"cwd": planted, "env": env, "text": True, "timeout": 120}
    if case == "stdin":
        kw["input"] = "what the test sends"
    if case == "merged":
        kw.update(stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    else:
        kw["capture_output"] = True
    args = {"plain": ["a", "b c"], "environment": ["threads"], "stdin": ["stdin"], "boom": ["boom"]}.get(case, [])
    forked, real = both(args, **kw)
    if case == "boom":  # the traceback's frames are runpy's either way, called from different places
        assert forked.stderr.startswith("to stderr\nTraceback (most recent call last):\n")
        forked.stderr, real.stderr = (p.stderr.splitlines()[-1] for p in (forked, real))
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert forked.returncode == {"code": 3, "boom": 1}.get(case, 0)
    assert f'"cwd": "{planted}"' in forked.stdout and '"x": "planted"' in forked.stdout
    assert "atexit ran" in forked.stdout
    assert ("threads 1" in forked.stdout) == (case == "environment")


def test_the_real_cli_answers_alike() -> None:
    forked, real = both(["nonsense"], capture_output=True, text=True, env={**os.environ, "COURSE_LANG": "zh"})
    assert forked.returncode == real.returncode == 2
    assert forked.stderr == real.stderr and "未知命令" in forked.stderr


def test_a_time_limit_stops_the_command(planted: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired) as stopped:
        course_cli.run(["sleep"], cwd=planted, capture_output=True, text=True, timeout=3)
    assert '"argv": ["sleep"]' in stopped.value.output
    with pytest.raises(subprocess.CalledProcessError):
        course_cli.run([], cwd=planted, capture_output=True, env={**os.environ, "CODE": "4"}, check=True)


def test_each_run_is_seeded_afresh(planted: Path) -> None:
    first, second = (course_cli.run(["random"], cwd=planted, capture_output=True, text=True).stdout.splitlines()[1]
                     for _ in range(2))
    for generator, one, other in zip(("random", "numpy", "torch"), first.split(), second.split()):
        assert one != other, f"{generator}'s first number is the same in two runs: {one}"


def test_forked_unless_python_reads_the_difference_at_its_start(planted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked by the server is not this process's child; with $PYTHONHASHSEED changed (read once, at
    Python's start), or with $COURSE_TEST_FORK=0, the command is a process of this one."""
    def parent(**extra: str) -> int:
        done = course_cli.run(["parent"], cwd=planted, capture_output=True, text=True, env={**os.environ, **extra})
        return int(done.stdout.split("parent ")[1].split()[0])
    assert parent() != os.getpid()
    assert parent(PYTHONHASHSEED="12345") == os.getpid()
    monkeypatch.setenv("COURSE_TEST_FORK", "0")  # as `COURSE_TEST_FORK=0 make test` sets it
    assert parent() == os.getpid()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to pin to")
def test_cpus_pins_the_command_both_ways(planted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cpus`` is what test_busy_machine.py's preexec_fn did: the command runs on those CPUs alone, forked or not;
    without it, on every CPU this process has."""
    one = {max(os.sched_getaffinity(0))}
    def cpus(**kw) -> str:
        done = course_cli.run(["cpus"], cwd=planted, capture_output=True, text=True, **kw)
        return done.stdout.split("cpus ")[1].splitlines()[0]
    assert cpus(cpus=one) == str(sorted(one)) and cpus() == str(sorted(os.sched_getaffinity(0)))
    monkeypatch.setenv("COURSE_TEST_FORK", "0")
    assert cpus(cpus=one) == str(sorted(one))
