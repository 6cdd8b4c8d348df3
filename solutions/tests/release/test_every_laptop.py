"""Every laptop (issue 43, part 4): the learner's loop without `make`, a shell, a POSIX path or `fork`.

Windows has no `make`, no `sh`, no `.venv/bin/`, and starts processes by `spawn`. So every target of the learner's
Makefile (solutions/learner/Makefile) has a `course` command that does the same (`make -n` shows what each target
runs; course_lib/provided/cli.py builds the same command lines), and the learner's README shows both, in English
and in Chinese. The `course` commands then run here as a Windows laptop would run them: `make` off the PATH (an
empty PATH), multiprocessing's start method forced to `spawn`, `os.fork` refused and a shell refused, in every
Python they start (GUARD, a sitecustomize.py on PYTHONPATH), which records every program started: Python alone.
What no emulation on Linux can show (a module only POSIX has, a path under /tmp, a text file read in the
locale's encoding, GBK on a Chinese Windows) is read from the code.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_admin.release.learner_tree import own_version
from course_lib.provided import cli
from course_lib.provided.layout import LAYOUT, REPO_ROOT

LEARNER = REPO_ROOT / "solutions" / "learner"
MAKEFILE = LEARNER / "Makefile"
LANGS = ("en", "zh_CN")


def learner_pyproject() -> str:
    return (LEARNER / "pyproject.toml").read_text(encoding="utf-8")  # read by its lines: Python 3.10 has no tomllib


def make_targets() -> list[str]:
    """The learner Makefile's targets, from its .PHONY line."""
    found = re.search(r"^\.PHONY:(.*)$", MAKEFILE.read_text(encoding="utf-8"), re.M)
    assert found, "the learner Makefile has no .PHONY line"
    return found.group(1).split()


# ------------------------------------------------------------------ each make target has its course command
def test_every_make_target_has_a_course_command() -> None:
    targets = make_targets()
    assert {"install", "check", "test", "submit", "lab"} <= set(targets)
    # install makes `course` itself: the README's venv and pip lines stand for it (test below)
    assert [t for t in targets if t != "install" and t not in cli.LEARNER] == []


@pytest.mark.parametrize("lang", LANGS)
def test_the_readme_gives_each_make_command_and_its_course_twin(lang: str) -> None:
    readme = own_version(REPO_ROOT, "README.md", None, lang)  # as released (the Chinese: from the current English)
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `make (\w+)[^`]*` \|.*$", readme, re.M)}
    assert set(rows) == set(make_targets()), rows
    for target, row in rows.items():
        if target == "install":
            assert "`py -m venv .venv`" in row and "pip install -c constraints-cpu.txt -e .`" in row, row
        else:
            assert re.match(rf"\| `make {target}[^`]*` \| `course {target}\b[^`]*` \|", row), row
    block = re.search(r"```powershell\n(.*?)```", readme, re.S)
    assert block, "no commands for a machine without make"
    lines = block.group(1).split("\n")
    assert lines[0] == "py -m venv .venv" and r".venv\Scripts\python -m pip install -c constraints-cpu.txt -e ." in lines
    assert lines[-2] == r".venv\Scripts\course check ch01"


def test_the_commands_windows_is_given_install_what_make_install_installs() -> None:
    """The README's pip line is the Makefile's: the same constraints, the same editable install of this folder."""
    recipe = MAKEFILE.read_text(encoding="utf-8")
    # --no-compile only makes the install faster (modules compiled on first import): the same packages either way
    assert "$(BIN)/python -m pip install --quiet --no-compile $(TORCH_CONSTRAINTS) -e ." in recipe
    assert "TORCH_CONSTRAINTS ?= -c constraints-cpu.txt" in recipe and "--upgrade pip" in recipe
    assert re.search(r'^\[project\.scripts\]\ncourse = "course_lib\.provided\.cli:main"$', learner_pyproject(), re.M)


def make_dry_run(tmp_path: Path, *args: str) -> list[str]:
    """The last command `make -n TARGET` would run in a learner tree, split (BIN: a stand-in, install up to date)."""
    shutil.copy(MAKEFILE, tmp_path / "Makefile")
    for name in ("pyproject.toml", "constraints-cpu.txt"):
        (tmp_path / name).touch()
    (tmp_path / "bin").mkdir(exist_ok=True)
    course = tmp_path / "bin" / "course"
    course.touch()
    later = (tmp_path / "pyproject.toml").stat().st_mtime + 10
    os.utime(course, (later, later))
    done = subprocess.run(["make", "-n", "--no-print-directory", *args, f"BIN={tmp_path / 'bin'}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1].split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("root", [True, False], ids=["as root", "as a user"])
def test_course_lab_and_course_test_run_what_make_runs(tmp_path: Path, root: bool) -> None:
    made = make_dry_run(tmp_path, "lab", f"LAB_UID={0 if root else 1000}")
    assert Path(made[0]).name == "jupyter" and made[1] == "lab"
    ours = cli.lab_command([], root)
    assert ours[:3] == [sys.executable, "-m", "jupyterlab"]  # the module behind `jupyter lab`
    assert ours[3:] == [a.rstrip("/") for a in made[2:]]
    made = make_dry_run(tmp_path, "test")
    assert made[1:] == ["-m", "pytest"] and Path(made[0]).name == "python"
    ours = cli.pytest_command([])
    assert ours[:3] == [sys.executable, "-m", "pytest"]
    # and the one option more, `-o testpaths=tests`, is the learner tree's own setting: there it changes nothing
    assert ours[3:] == ["-o", "testpaths=tests"]
    assert re.search(r'^\[tool\.pytest\.ini_options\]\ntestpaths = \["tests"\]$', learner_pyproject(), re.M)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target,course", [("check CH=03", "check ch03"), ("submit CH=03", "submit ch03"),
                                           ("submit CH=03 LEARNER=ada FORCE=1", "submit ch03 --learner ada --force")])
def test_make_check_and_submit_are_course_commands(tmp_path: Path, target: str, course: str) -> None:
    made = make_dry_run(tmp_path, *target.split())
    assert Path(made[0]).name == "course" and made[1:] == course.split()


def test_course_lab_as_root_says_so_and_on_windows_there_is_no_root(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(cli, "_wait", lambda command: ran.append(command) or 0)
    monkeypatch.setattr(os, "geteuid", lambda: 0, raising=False)
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    assert cli.main(["lab", "--port", "8899"]) == 0
    assert ran[-1][3:] == ["--allow-root", "--port", "8899", "exercises"]
    assert "你是 root 用户" in capsys.readouterr().out
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["lab"]) == 0 and ran[-1][3:] == ["exercises"] and capsys.readouterr().out == ""
    monkeypatch.delattr(os, "geteuid")  # Windows: no uids
    assert not cli.is_root() and cli.main(["lab"]) == 0 and ran[-1][3:] == ["exercises"]


# ------------------------------------------------------------------ the commands, run as a Windows laptop would
GUARD = '''"""What a Windows laptop lacks, in every Python started with this folder on PYTHONPATH (test_every_laptop)."""
import json, multiprocessing, os, subprocess, sys

multiprocessing.set_start_method("spawn", force=True)


def _no_fork(*args, **kwargs):
    raise OSError("os.fork: this laptop has none (Windows starts processes by spawn)")


os.fork = _no_fork
if hasattr(os, "forkpty"):
    os.forkpty = _no_fork
_popen_init = subprocess.Popen.__init__


def _recorded(self, args, *rest, **kwargs):
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    argv = [os.fsdecode(a) for a in argv]
    with open(os.environ["LAPTOP_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": argv, "shell": bool(kwargs.get("shell"))}) + "\\n")
    if kwargs.get("shell"):
        raise OSError("shell=True: this laptop has no POSIX shell")
    if os.environ.get("LAPTOP_FAKE_JUPYTERLAB") and argv[1:3] == ["-m", "jupyterlab"]:
        args = [argv[0], "-c", "import sys; print('jupyterlab called with:', *sys.argv[1:])", *argv[3:]]
    return _popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _recorded
'''


@pytest.fixture
def laptop(tmp_path: Path) -> dict[str, object]:
    """How to run a command as on the laptop: its environment (an empty PATH, the guard), and its log."""
    (tmp_path / "guard").mkdir()
    (tmp_path / "guard" / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
    (tmp_path / "empty-path").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=str(tmp_path / "empty-path"), PYTHONPATH=str(tmp_path / "guard"),
               LAPTOP_LOG=str(tmp_path / "programs.jsonl"), COURSE_LANG="en")
    return {"env": env, "log": tmp_path / "programs.jsonl", "tmp": tmp_path}


def on_laptop(laptop: dict[str, object], *command: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**laptop["env"], **extra_env}  # type: ignore[dict-item]
    return subprocess.run([sys.executable, "-m", "course_lib.provided.cli", *command], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def programs(laptop: dict[str, object]) -> list[dict]:
    """What the laptop's Pythons started, but `uname -p`: Python's own ``platform.processor()`` asks it on POSIX
    systems (and takes '' when it is missing, as here; on Windows it reads the registry), not the course's code."""
    log = laptop["log"]
    assert isinstance(log, Path)
    started = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []
    return [entry for entry in started if entry["argv"] != ["uname", "-p"]]


def test_the_guard_refuses_fork_and_a_shell_and_forces_spawn(laptop: dict[str, object]) -> None:
    """The emulation itself can fail a command: a planted fork, a planted shell, and make not found."""
    probe = ("import multiprocessing, os, shutil, subprocess\n"
             "print(multiprocessing.get_start_method(), shutil.which('make'))\n"
             "for planted in (os.fork, lambda: subprocess.run('make test', shell=True)):\n"
             "    try:\n        planted()\n    except OSError as err:\n        print('refused:', err)\n")
    done = subprocess.run([sys.executable, "-c", probe], env=laptop["env"], capture_output=True, text=True,  # type: ignore[arg-type]
                          timeout=60)
    assert done.stdout.splitlines() == ["spawn None", "refused: os.fork: this laptop has none (Windows starts "
                                        "processes by spawn)", "refused: shell=True: this laptop has no POSIX shell"], \
        done.stdout + done.stderr
    assert programs(laptop) == [{"argv": ["make test"], "shell": True}]


def test_course_check_passes_on_the_reference_without_make(laptop: dict[str, object]) -> None:
    done = on_laptop(laptop, "check", "ch01", "--impl", "reference")
    assert done.returncode == 0 and "All public checks pass" in done.stdout, done.stdout + done.stderr
    assert programs(laptop) == []  # nothing started: no make, no shell, not even a Python


def test_course_lab_on_the_laptop(laptop: dict[str, object]) -> None:
    lab = on_laptop(laptop, "lab", LAPTOP_FAKE_JUPYTERLAB="1")
    allow = ["--allow-root"] if os.geteuid() == 0 else []
    assert lab.returncode == 0 and f"jupyterlab called with: {' '.join([*allow, 'exercises'])}" in lab.stdout, \
        lab.stdout + lab.stderr
    assert [p["argv"] for p in programs(laptop)] == [[sys.executable, "-m", "jupyterlab", *allow, "exercises"]]


def test_course_submit_on_the_laptop(laptop: dict[str, object]) -> None:
    out = laptop["tmp"] / "submissions"  # type: ignore[operator]
    submit = on_laptop(laptop, "submit", "ch01", "--out", str(out), "--no-notebook", COURSE_LEARNER="laptop")
    assert submit.returncode == 0 and (out / "laptop_ch01.zip").is_file(), submit.stdout + submit.stderr
    assert programs(laptop) == []  # submit started nothing


@pytest.mark.slow  # a second Python runs pytest on chapter 01's public tests (about 10-20 s on 2 shared cores)
def test_course_test_passes_on_the_reference_without_make(laptop: dict[str, object]) -> None:
    done = on_laptop(laptop, "test", "-k", "ch01", "-p", "no:cacheprovider", "-q")
    assert done.returncode == 0 and re.search(r"\d+ passed", done.stdout), done.stdout[-3000:] + done.stderr[-3000:]
    started = programs(laptop)
    assert [p["argv"][:5] for p in started] == [[sys.executable, "-m", "pytest", "-o", "testpaths=tests"]], started


# ------------------------------------------------------------------ what only the code can show
POSIX_ONLY_MODULES = {"resource", "fcntl", "pwd", "grp", "termios", "pty", "tty", "posix", "crypt"}
POSIX_ONLY_CALLS = {("os", name) for name in ("fork", "forkpty", "geteuid", "getuid", "getegid", "getgid", "setsid",
                                               "killpg", "getpgid", "setpgrp", "getloadavg", "mkfifo", "chown",
                                               "uname", "wait4")} | \
                   {("signal", name) for name in ("SIGKILL", "SIGALRM", "SIGHUP", "SIGUSR1", "SIGCHLD", "alarm",
                                                   "setitimer")}
POSIX_PATH = re.compile(r"^/(tmp|dev|usr|bin|etc|proc|var|home)\b|(^|[/\\])\.?venv/bin\b|^(ba)?sh$|^make$")


def learner_path() -> list[Path]:
    """Every module of course_lib/provided: the learner's commands, and what the book's pages import (bench.py,
    page 03's timings), which a learner runs on their own machine too."""
    return sorted((LAYOUT.course_lib / "provided").rglob("*.py"))


def guarded_imports(tree: ast.AST) -> set[int]:
    """The import statements inside a ``try`` that catches ImportError (or ModuleNotFoundError): a module that
    Windows lacks, with what to do without it."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is not None and {getattr(n, "id", "") for n in ast.walk(h.type)} & {"ImportError",
                                                                                           "ModuleNotFoundError"}
                for h in node.handlers):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return guarded


def posix_only(path: Path) -> list[str]:
    """What in ``path``'s code needs a POSIX system (a module, a call, a path or program name, a shell) or reads
    or writes text that Windows would decode otherwise than Linux."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    messages = {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                and isinstance(n.func, ast.Name) and n.func.id in ("_", "N_")}
    found, guarded = [], guarded_imports(tree)
    for node in ast.walk(tree):
        where = f"{LAYOUT.rel(path)}:{getattr(node, 'lineno', '?')}"
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in POSIX_ONLY_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in POSIX_ONLY_MODULES:
            found.append(f"{where}: from {node.module} import")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and (node.value.id, node.attr) in POSIX_ONLY_CALLS):
            found.append(f"{where}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg == "shell":
            found.append(f"{where}: shell=")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in messages and POSIX_PATH.search(node.value)):
            found.append(f"{where}: {node.value!r}")
        elif isinstance(node, ast.Call) and locale_encoded(node):
            found.append(f"{where}: {ast.unparse(node.func)}() without encoding=")
    return found


def locale_encoded(call: ast.Call) -> bool:
    """A text file read or written in the locale's encoding (cp1252, or GBK on a Chinese Windows; UTF-8 on Linux
    and macOS): ``open``, ``read_text`` or ``write_text`` without ``encoding=``, unless binary, or the text written
    is ``json.dumps`` without ``ensure_ascii=False`` (ASCII, the same in every encoding)."""
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    if name not in ("open", "read_text", "write_text") or any(k.arg == "encoding" for k in call.keywords):
        return False
    if name == "open" and not (isinstance(call.func, ast.Name) or ast.unparse(call.func).startswith(("io.", "Path"))):
        return False  # os.open, zipfile's, safetensors': not a text file
    mode = next((k.value for k in call.keywords if k.arg == "mode"), call.args[1] if len(call.args) > 1 else None)
    if isinstance(mode, ast.Constant) and "b" in str(mode.value):
        return False
    if name == "write_text" and call.args and isinstance(call.args[0], ast.Call) and \
            ast.unparse(call.args[0].func) == "json.dumps":
        return any(k.arg == "ensure_ascii" for k in call.args[0].keywords)
    return True


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('"""/tmp in a docstring is prose."""\nimport os, resource, subprocess\n'
                       'x = os.geteuid()\nsubprocess.run(["make", "test"], shell=True)\nopen("/tmp/x", "rb")\n'
                       'y = getattr(os, "geteuid", None)\nz = P.read_text()\nP.write_text(json.dumps(z))\n'
                       'P.write_text(json.dumps(z, ensure_ascii=False))\nP.read_text(encoding="utf-8")\n'
                       'try:\n    import fcntl\nexcept ImportError:\n    fcntl = None\n'      # guarded: Windows has a way
                       'try:\n    import pwd\nexcept OSError:\n    pass\n',                  # not an import's guard
                       encoding="utf-8")
    assert sorted(line.split(": ", 1)[1] for line in posix_only(planted)) == [
        "'/tmp/x'", "'make'", "P.read_text() without encoding=", "P.write_text() without encoding=",
        "import pwd", "import resource", "os.geteuid", "shell="]


def test_the_learners_code_needs_no_posix_system_and_reads_its_text_as_utf8() -> None:
    assert [line for path in learner_path() for line in posix_only(path)] == []


def test_bench_imports_and_measures_nothing_on_a_machine_without_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Windows learner running the book's page 03 gets: the module imports; the peak is 0, not measured."""
    import importlib
    import sys

    from course_lib.provided import bench
    assert bench.peak_rss_bytes() > 0                              # here, measured
    monkeypatch.setitem(sys.modules, "resource", None)            # as on Windows: import resource fails
    assert importlib.reload(bench).peak_rss_bytes() == 0
