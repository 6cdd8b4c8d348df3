"""`course gradescope ch02`: the autograder zip, run as Gradescope runs it.

The zip is unpacked the way Gradescope builds its image (/autograder/source = the zip,
/autograder/run_autograder = its script), under a temporary folder that stands for /autograder
($COURSE_AUTOGRADER_ROOT), with this checkout's venv standing for the one setup.sh installs
($COURSE_AUTOGRADER_PYTHON); setup.sh's last step (prepare) runs once. Then run_autograder grades a
correct upload (the zip `make submit` writes), a wrong one (its files) and a hostile one, and each
results.json is validated against the schema of Gradescope's documented output format, here.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from course_lib.provided.layout import REPO_ROOT

from .. import planted

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
NO_SCALE = sum(planted.NO_SCALE_VECTOR)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/autograder as Gradescope lays it out, from the zip `course gradescope ch02` writes."""
    base = tmp_path_factory.mktemp("gradescope")
    made = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", "gradescope", "ch02", "--out",
                           str(base / "zips")], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    with zipfile.ZipFile(base / "zips" / "gradescope_ch02.zip") as zf:
        names = zf.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)  # at the root of the zip, as Gradescope requires
        assert all((zf.getinfo(n).external_attr >> 16) & 0o111 for n in ("setup.sh", "run_autograder"))
        assert "course/solutions/hidden/ch02.py" in names and not [n for n in names if "__pycache__" in n]
        setup = zf.read("setup.sh").decode()
        root = base / "autograder"
        zf.extractall(root / "source")
    assert "bubblewrap" in setup and "gradescope prepare --chapters 02" in setup
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)
    subprocess.run(["chmod", "-R", "go-rwx", str(root / "source" / "course" / "solutions")], check=True)  # as setup.sh
    env = {**os.environ, "PYTHONPATH": f"{root}/source/course:{root}/source/course/solutions"}
    prepared = subprocess.run([sys.executable, "-m", "course_admin.exports.gradescope", "prepare", "--root", str(root),
                               "--chapters", "02"], env=env, capture_output=True, text=True, timeout=600)
    assert prepared.returncode == 0, prepared.stderr
    return root


def run_autograder(root: Path, files: dict[str, str | bytes], **env_more: str) -> tuple[dict, str]:
    """Upload ``files`` as /autograder/submission, run run_autograder, return results.json and its stdout."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "results").mkdir()
    (root / "submission").mkdir()
    for rel, content in files.items():
        path = root / "submission" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"email": "zoe@uni.edu", "sid": "zoe"}]}))
    env = {**os.environ, "COURSE_AUTOGRADER_ROOT": str(root), "COURSE_AUTOGRADER_PYTHON": sys.executable, **env_more}
    proc = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, SCHEMA)
    return data, proc.stdout + proc.stderr


def submit_zip(attention: str, learner: str = "zoe") -> bytes:
    """The zip `make submit CH=02` writes: one folder holding manifest.json and course_lib/."""
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{learner}_ch02/manifest.json", json.dumps({"learner": learner, "chapter": "02"}))
        zf.writestr(f"{learner}_ch02/course_lib/__init__.py", "")
        zf.writestr(f"{learner}_ch02/course_lib/attention.py", attention)
    return buf.getvalue()


def files(attention: str) -> dict[str, str | bytes]:
    return {"manifest.json": json.dumps({"learner": "zoe", "chapter": "02"}), "course_lib/__init__.py": "",
            "course_lib/attention.py": attention}


def test_correct_submission(autograder: Path) -> None:
    data, _ = run_autograder(autograder, {"zoe_ch02.zip": submit_zip(planted.REFERENCE)})
    assert data["score"] == FULL == sum(t["max_score"] for t in data["tests"])
    assert all(t["status"] == "passed" for t in data["tests"])
    hidden = [t for t in data["tests"] if t["name"].startswith("hidden case")]
    assert len(hidden) == len(planted.HIDDEN_POINTS) and all(t["visibility"] == "after_published" for t in hidden)
    assert all(t["visibility"] == "visible" for t in data["tests"] if t not in hidden)
    assert "bubblewrap" in data["output"] and "Warning" not in data["output"]


def test_wrong_submission(autograder: Path) -> None:
    data, _ = run_autograder(autograder, files(planted.NO_SCALE))
    assert data["score"] == NO_SCALE
    assert [t["score"] for t in data["tests"]] == [float(p) for p in planted.NO_SCALE_VECTOR]
    failed = [t for t in data["tests"] if t["status"] == "failed" and t["visibility"] == "visible"]
    assert failed and "not divided by √d_k" in failed[0]["output"]


def test_hostile_submission(autograder: Path) -> None:
    """Code that writes its own results.json, reads the hidden cases and fakes its checks gets the score
    of what it computes (no √d_k scale), and nothing it wrote or read reaches results.json."""
    results = autograder / "results" / "results.json"
    hidden = autograder / "source" / "course" / "solutions" / "hidden" / "ch02.py"
    attack = planted._prefix(
        "import json, torch\n"
        f"for _p in ({str(results)!r}, {str(results.parent / 'results.json.tmp')!r}):\n"
        "    try:\n"
        "        open(_p, 'w').write(json.dumps({'score': 999.0, 'tests': []}))\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        f"    print('STOLEN' + open({str(hidden)!r}).read())\n"
        "except OSError:\n"
        "    pass\n"
        "torch.allclose = lambda *a, **k: True\n"
        "print(json.dumps({'score': 999.0}))\n", planted.NO_SCALE)
    data, _ = run_autograder(autograder, files(attack))
    assert data["score"] == NO_SCALE
    text = json.dumps(data)
    assert "STOLEN" not in text and "999" not in text and "BEGIN SOLUTION" not in text


def test_nothing_to_grade(autograder: Path) -> None:
    data, _ = run_autograder(autograder, {"notes.txt": "I forgot my code\n"})
    assert data["score"] == 0 and data["tests"] == [] and "Not graded" in data["output"]


def test_no_sandbox_grades_nothing(autograder: Path) -> None:
    """Where bubblewrap is not what would run, a zip built without --allow-rlimits grades nothing and says why."""
    data, _ = run_autograder(autograder, files(planted.REFERENCE), COURSE_GRADE_ISOLATION="rlimits")
    assert data["score"] == 0 and data["tests"] == []
    assert "Not graded" in data["output"] and "--allow-rlimits" in data["output"]


def test_the_schema_catches_what_gradescope_refuses() -> None:
    """The validation above can fail: results.json shapes the documented format does not allow."""
    good = {"score": 1.0, "tests": [{"name": "a", "score": 1.0, "max_score": 1.0, "visibility": "after_published"}]}
    jsonschema.validate(good, SCHEMA)
    for bad in ({"tests": [{"name": "a", "visibility": "later"}]}, {"score": "1"}, {"output": "x"},
                {"score": 1.0, "tests": [{"name": "a", "score": 1, "hidden": True}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)
