"""nbgrader's loop on a real JupyterHub (hub_machine.py), for two learners, through the hub only.

The hub runs the course's solutions/hub/jupyterhub_config.py and every user reads
solutions/hub/nbgrader_config.py, with a test authenticator, loopback ports and temporary folders only
added. Each user acts with a token of their own: the instructor through the formgrader service
(generate, release, collect, autograde, a hand score, feedback), each learner in their own server
(nbgitpuller link to the learner tree, their code saved as JupyterLab saves it, fetch, `course submit
--into-assignment` typed in a terminal, submit, fetch feedback). `course grade` and `course feedback`
run on the instructor's checkout, as root, as on the instructor's machine. Access: a user outside the
course fetches nothing, a learner cannot open the formgrader, collect, read the exchange's inbound or
another learner's home.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from course_admin.release.learner_tree import export_learner_tree

from course_lib.provided.layout import REPO_ROOT

from .. import planted
from .hub_machine import Hub, missing

pytestmark = [pytest.mark.hub]

COURSE, ASSIGNMENT, ANSWER = "tfs", "ch02_attention", "answer-sqrt-dk"
SOURCE = REPO_ROOT / "solutions" / "source" / ASSIGNMENT
FG = f"/services/{COURSE}/formgrader/api"
WHY = missing()


def ok(r, what: str) -> dict | list:
    assert r.ok, f"{what}: HTTP {r.status_code} {r.text[:800]}"
    body = r.json() if r.text else {}
    if isinstance(body, dict) and body.get("success") is False:
        raise AssertionError(f"{what}: {json.dumps(body)[:1500]}")
    return body


def course(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"course {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


class GitHost(BaseHTTPRequestHandler):
    """A git host on loopback: git's smart HTTP protocol (what nbgitpuller's shallow clone needs), each
    request answered by ``git http-backend`` as a web server runs it, from ``served``."""

    served = ""

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        self._backend()

    def log_message(self, *args: object) -> None:
        pass

    def _backend(self) -> None:
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {"PATH": os.environ.get("PATH", ""), "GIT_PROJECT_ROOT": self.served, "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), "REMOTE_ADDR": "127.0.0.1"}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=120).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        headers = [line.split(":", 1) for line in head.decode("latin-1").split("\r\n") if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.send_response(status)
        for key, value in headers:
            if key.lower() != "status":
                self.send_header(key, value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def learner_repository(root: Path) -> Iterator[str]:
    """The learner tree as the learners' git repository, served on loopback as a git host serves it;
    yields its URL."""
    work, served = root / "learners-work", root / "git-host"
    export_learner_tree(REPO_ROOT, work)
    git = ["git", "-c", "user.name=instructor", "-c", "user.email=instructor@example.org"]
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "learner tree"]):
        subprocess.run([*git, *argv], cwd=work, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(served / "learners.git")], check=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Host", (GitHost,), {"served": str(served)}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/learners.git"
    finally:
        server.shutdown()


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"no real hub here: {WHY}")
@pytest.mark.skipif(not SOURCE.is_dir(), reason="the chapter 02 source notebook is missing")
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_nbgrader_loop_on_a_real_hub(tmp_path: Path) -> None:
    hub = Hub(tmp_path / "hub", COURSE, instructors=["teacher"], learners=["alice", "bob"], others=["carol"])
    try:
        _loop(hub)
    finally:
        hub.stop()


def _loop(hub: Hub) -> None:
    hub.start()
    shutil.copytree(SOURCE, hub.course_dir / "solutions" / "source" / ASSIGNMENT)
    hub.give(hub.grader, hub.course_dir)
    with learner_repository(hub.root) as repo:
        _as_a_class(hub, repo)


def _as_a_class(hub: Hub, repo: str) -> None:
    # The instructor, in the formgrader: generate and release.
    ok(hub.as_user("teacher", "POST", f"{FG}/assignment/{ASSIGNMENT}/assign"), "generate_assignment")
    ok(hub.as_user("teacher", "POST", f"{FG}/assignment/{ASSIGNMENT}/release"), "release_assignment")

    code = {"alice": planted.REFERENCE, "bob": planted.NO_SCALE}
    answer = {"alice": "q·k sums d_k products of variance 1: its variance is d_k, so divide by √d_k.", "bob": ""}
    py = sys.executable  # the hub image's Python (a login shell's PATH does not hold this venv)
    for name in [*code, "carol"]:
        hub.start_server(name)
        # The nbgitpuller link of the guide: the first visit clones the learner tree and lands in it.
        link = {"repo": repo, "branch": "main", "targetpath": "learners",
                "urlpath": "lab/tree/learners/README.md"}
        page = hub.as_user(name, "GET", f"/user/{name}/git-pull", params=link)
        assert page.status_code == 200 and "lab/tree/learners/README.md" in page.text, \
            f"nbgitpuller's page for {name}: HTTP {page.status_code} {page.text[:500]}"
        pulled = hub.as_user(name, "GET", f"/user/{name}/git-pull/api", params=link, stream=True)
        events = [json.loads(line[5:]) for line in pulled.iter_lines(decode_unicode=True) if line.startswith("data:")]
        assert events and events[-1]["phase"] == "finished", f"nbgitpuller for {name}: {events[-3:]}"
        assert "Transformers from Scratch" in hub.read(name, "learners/README.md")["content"]

    listed = ok(hub.as_user("carol", "POST", "/user/carol/assignments/fetch",
                            params={"assignment_id": ASSIGNMENT, "course_id": COURSE}), "carol's fetch")
    assert not any(a.get("status") == "fetched" for a in listed.get("value", [])), listed
    assert hub.as_user("carol", "GET", f"/user/carol/api/contents/{ASSIGNMENT}").status_code == 404, \
        "a user outside the course fetched the assignment"

    for name, mine in code.items():
        hub.write(name, "learners/course_lib/attention.py", mine)
        listed = ok(hub.as_user(name, "POST", f"/user/{name}/assignments/fetch",
                                params={"assignment_id": ASSIGNMENT, "course_id": COURSE}), f"{name}'s fetch")
        assert any(a["status"] == "fetched" for a in listed["value"]), listed
        nb_path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        nb = hub.read(name, nb_path)["content"]
        for cell in nb["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == ANSWER and answer[name]:
                cell["source"] = answer[name]
        r = hub.as_user(name, "PUT", f"/user/{name}/api/contents/{nb_path}", json={"type": "notebook", "content": nb})
        assert r.ok, r.text
        rc, said = hub.terminal(name, f'cd ~/learners && {py} -m course_lib.provided.cli submit ch02 --into-assignment '
                                      f'--notebook ~/{nb_path} --learner "$JUPYTERHUB_USER"')
        assert rc == 0 and f"nbgrader submit {ASSIGNMENT}" in said, said[-2000:]
        ok(hub.as_user(name, "POST", f"/user/{name}/assignments/submit",
                       params={"assignment_id": ASSIGNMENT, "course_id": COURSE}), f"{name}'s submit")

    # What a learner cannot do.
    for path in (f"{FG}/assignment/{ASSIGNMENT}/collect", f"/services/{COURSE}/formgrader"):
        method = "POST" if path.endswith("collect") else "GET"
        r = hub.as_user("alice", method, path)
        assert r.status_code == 403, f"a learner reached {path}: HTTP {r.status_code}"
    inbound = hub.exchange / COURSE / "inbound"
    rc, said = hub.terminal("alice", f"ls {inbound}")
    assert rc != 0 and "Permission denied" in said, f"a learner listed the inbound folder: {said[-500:]}"
    rc, said = hub.terminal("bob", f"cat {hub.home('alice')}/learners/course_lib/attention.py")
    assert rc != 0 and "Permission denied" in said, f"a learner read another's code: {said[-500:]}"

    # The instructor: collect (each learner's course_lib comes with the notebook), grade, hand score, feedback.
    ok(hub.as_user("teacher", "POST", f"{FG}/assignment/{ASSIGNMENT}/collect"), "collect")
    submissions, grades = hub.course_dir / "submissions", hub.course_dir / "grades"
    for name, mine in code.items():
        snapshot = submissions / name / ASSIGNMENT / "course_submission" / "course_lib" / "attention.py"
        assert snapshot.is_file() and snapshot.read_text(encoding="utf-8") == mine, f"collect lost {name}'s code"
    grade = ["grade", str(submissions), "--out", str(grades), "--chapters", "ch02", "--quiet"]
    course(*grade)
    hub.give(hub.grader, grades)
    for name in code:
        ok(hub.as_user("teacher", "POST", f"{FG}/submission/{ASSIGNMENT}/{name}/autograde"), f"autograde {name}")
    (alice_nb,) = [s for s in ok(hub.as_user("teacher", "GET", f"{FG}/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}"),
                                 "submitted notebooks") if s["student"] == "alice"]
    marks = ok(hub.as_user("teacher", "GET", f"{FG}/grades", params={"submission_id": alice_nb["id"]}), "grades")
    (mark,) = [m for m in marks if m["name"] == ANSWER]
    ok(hub.as_user("teacher", "PUT", f"{FG}/grade/{mark['id']}", json={**mark, "manual_score": 1.5}), "hand score")
    course(*grade, "--manual", str(grades / "gradebook.db"))
    with open(grades / "totals.csv", newline="", encoding="utf-8") as fh:
        totals = {(r["learner"], r["kind"]): float(r["points"]) for r in csv.DictReader(fh)}
    assert totals[("alice", "course_lib")] == sum(planted.FULL)
    assert totals[("bob", "course_lib")] == sum(planted.NO_SCALE_VECTOR)
    assert totals[("alice", "notebook")] == 1.5 and totals[("bob", "notebook")] == 0

    hub.give(hub.grader, grades)
    ok(hub.as_user("teacher", "POST", f"{FG}/assignment/{ASSIGNMENT}/generate_feedback"), "generate_feedback")
    course("feedback", "ch02", "--out", str(grades))
    hub.give(hub.grader, grades)
    ok(hub.as_user("teacher", "POST", f"{FG}/assignment/{ASSIGNMENT}/release_feedback"), "release_feedback")

    pages = {}
    for name in code:
        ok(hub.as_user(name, "POST", f"/user/{name}/assignments/fetch_feedback",
                       params={"assignment_id": ASSIGNMENT, "course_id": COURSE}), f"{name}'s fetch_feedback")
        (stamp,) = hub.read(name, f"{ASSIGNMENT}/feedback")["content"]
        pages[name] = hub.read(name, f"{stamp['path']}/{ASSIGNMENT}.html")["content"]
    alice, bob = pages["alice"], pages["bob"]
    assert "Feedback for alice" in alice and "Feedback for bob" not in alice
    assert f"course_lib checks: {sum(planted.FULL):g} / {sum(planted.FULL):g}" in alice
    assert "Feedback for bob" in bob and f"course_lib checks: {sum(planted.NO_SCALE_VECTOR):g} / " in bob
    assert "not divided by √d_k" in bob and "not divided by √d_k" not in alice
    assert answer["alice"][:20] in alice
