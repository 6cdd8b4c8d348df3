"""A real JupyterHub on loopback, for test_hub.py: the course's own jupyterhub_config.py, the npm
configurable-http-proxy, local users each with a server of their own, and the formgrader as a hub service.

Nothing of this machine is changed. The hub runs as root in a mount namespace of its own, where:

* the class exists as local users: /etc/passwd and /etc/group are covered by copies that add them
  (homes under the test's folder, mode 700, each owned by its user);
* every folder closed to others on the way to Python, the checkout and the test's folder is opened
  (``docker_like.opening``), so that each user's server can run this venv's Python.

The test talks to the hub over HTTP only, each user with a token of their own; commands a user types
in a terminal go through the server's terminal websocket, as in JupyterLab.
"""
from __future__ import annotations

import asyncio
import json
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

from course_lib.provided.layout import REPO_ROOT

from . import docker_like

CHP = REPO_ROOT / ".hub" / "node_modules" / ".bin" / "configurable-http-proxy"
HUB_CONFIG = REPO_ROOT / "solutions" / "hub" / "jupyterhub_config.py"
NBGRADER_CONFIG = REPO_ROOT / "solutions" / "hub" / "nbgrader_config.py"
BIN = Path(sys.executable).parent
PASSWORD = "course-hub-test"
WAIT_S = 180  # for the hub or a server to answer: generous, the machine may be busy


def missing() -> str | None:
    """Why a real hub cannot run here (the test is skipped with this reason), or None."""
    if os.geteuid() != 0:
        return "the hub test makes local users and runs each user's server as that user: run it as root"
    if not CHP.exists():
        return (f"configurable-http-proxy is not installed at {CHP}: `make install` installs it where npm "
                "exists (npm install --prefix .hub configurable-http-proxy@4)")
    for module in ("jupyterhub", "nbgitpuller"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed: `make install` installs the dev extra, which has it"
    for tool in ("unshare", "git"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on this machine"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hub:
    """``Hub(root, course="tfs", instructors=[...], learners=[...], others=[...])``: start() runs it,
    stop() ends it. ``others`` may log in to the hub but are in no course."""

    def __init__(self, root: Path, course: str, instructors: list[str], learners: list[str], others: list[str]):
        self.root, self.course = root, course
        self.instructors, self.learners, self.others = instructors, learners, others
        self.grader = f"grader-{course}"
        self.names = [*instructors, *learners, *others, self.grader]
        self.port, self.hub_port, self.proxy_port, self.fg_port = (free_port() for _ in range(4))
        self.url = f"http://127.0.0.1:{self.port}"
        self.driver = uuid.uuid4().hex
        self.tokens: dict[str, str] = {}
        self.uids: dict[str, int] = {}
        self.proc: subprocess.Popen | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="hub-scratch-"))

    # -- the machine -------------------------------------------------------------------------------
    def home(self, name: str) -> Path:
        return self.root / "home" / name

    @property
    def course_dir(self) -> Path:
        return self.home(self.grader) / "transformers-from-scratch"

    @property
    def exchange(self) -> Path:
        return self.root / "exchange"

    def _users(self) -> None:
        """Copies of /etc/passwd and /etc/group with the class added, uids above any in use."""
        taken = {p.pw_uid for p in pwd.getpwall()}
        uid = max(60000, *(u for u in taken if u < 65000)) + 1
        passwd = Path("/etc/passwd").read_text(encoding="utf-8")
        group = Path("/etc/group").read_text(encoding="utf-8")
        for name in self.names:
            self.uids[name] = uid
            home = self.home(name)
            home.mkdir(parents=True, mode=0o700)
            os.chown(home, uid, uid)
            passwd += f"{name}:x:{uid}:{uid}:{name}:{home}:/bin/bash\n"
            group += f"{name}:x:{uid}:\n"
            uid += 1
        (self.root / "passwd").write_text(passwd, encoding="utf-8")
        (self.root / "group").write_text(group, encoding="utf-8")

    def give(self, name: str, path: Path) -> None:
        """``chown -R name path``: what the user owns in their home."""
        subprocess.run(["chown", "-R", f"{self.uids[name]}:{self.uids[name]}", str(path)], check=True)

    def _overlay(self) -> Path:
        """The test's config: the course's jupyterhub_config.py, then a test authenticator, ports, folders."""
        env = {"JUPYTER_CONFIG_PATH": str(self.root / "etc-jupyter"), "TFS_EXCHANGE": str(self.exchange),
               "TFS_COURSE": self.course, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
               "GIT_CONFIG_VALUE_0": "*"}
        text = f"""
c = get_config()  # noqa: F821
load_subconfig({str(HUB_CONFIG)!r})  # noqa: F821
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allowed_users |= {set(self.others)!r}
c.JupyterHub.bind_url = {self.url!r}
c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", {self.hub_port}
c.ConfigurableHTTPProxy.command = [{str(CHP)!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.proxy_port}"
c.ConfigurableHTTPProxy.pid_file = {str(self.root / 'proxy.pid')!r}
c.JupyterHub.db_url = "sqlite:///{self.root / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = {str(self.root / 'cookie_secret')!r}
c.JupyterHub.pid_file = {str(self.root / 'jupyterhub.pid')!r}
c.Spawner.environment = {env!r}
c.Spawner.start_timeout = c.Spawner.http_timeout = {WAIT_S}
c.JupyterHub.services[0]["environment"].update({env!r})
c.JupyterHub.services.append({{"name": "driver", "api_token": {self.driver!r}}})
c.JupyterHub.load_roles.append({{"name": "driver", "services": ["driver"],
                                 "scopes": ["admin:users", "admin:servers", "tokens"]}})
"""
        path = self.root / "jupyterhub_test_config.py"
        path.write_text(text, encoding="utf-8")
        return path

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self._users()
        self.exchange.mkdir(mode=0o777)
        self.exchange.chmod(0o777)
        self.course_dir.mkdir()  # the instructor's clone: the repository's nbgrader settings, sources added later
        shutil.copy(REPO_ROOT / "nbgrader_config.py", self.course_dir / "nbgrader_config.py")
        self.give(self.grader, self.course_dir)
        (self.root / "etc-jupyter").mkdir()
        shutil.copy(NBGRADER_CONFIG, self.root / "etc-jupyter" / "nbgrader_config.py")
        overlay = self._overlay()
        q = shlex.quote
        lines = [*docker_like.opening([REPO_ROOT, self.root], self.scratch),
                 f"mount --bind {q(str(self.root / 'passwd'))} /etc/passwd",
                 f"mount --bind {q(str(self.root / 'group'))} /etc/group"]
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               "TFS_COURSE": self.course, "TFS_INSTRUCTORS": " ".join(self.instructors),
               "TFS_LEARNERS": " ".join(self.learners), "TFS_GRADER_HOME": str(self.home(self.grader)),
               "TFS_COURSE_DIR": str(self.course_dir), "TFS_FORMGRADER_PORT": str(self.fg_port)}
        log = open(self.root / "jupyterhub.log", "wb")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(
            docker_like.in_mount_namespace(lines, [str(BIN / "jupyterhub"), "-f", str(overlay)]),
            cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait(lambda: requests.get(f"{self.url}/hub/api/", timeout=5).ok, "the hub to answer")
        for name in self.names:
            self.tokens[name] = self._token(name)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for name in self.names:  # each server ends with its user's hub record
                try:
                    self.api("DELETE", f"/hub/api/users/{name}/server", self.driver)
                except requests.RequestException:
                    pass
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(30)
        pid_file = self.root / "proxy.pid"  # the proxy outlives a hub that crashed
        pid = pid_file.read_text().strip() if pid_file.is_file() else ""
        try:
            if pid.isdigit() and "configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                os.kill(int(pid), 9)
        except OSError:
            pass  # gone already
        subprocess.run(["pkill", "-9", "-u", ",".join(str(u) for u in self.uids.values())], check=False)
        if hasattr(self, "_log"):
            self._log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def log(self) -> str:
        return (self.root / "jupyterhub.log").read_text(encoding="utf-8", errors="replace")[-6000:]

    def _wait(self, ready, what: str) -> None:
        end = time.monotonic() + WAIT_S
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the hub exited ({self.proc.returncode}) waiting for {what}:\n{self.log()}")
            try:
                if ready():
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise AssertionError(f"{WAIT_S} s waiting for {what}:\n{self.log()}")

    # -- HTTP, as each user ------------------------------------------------------------------------
    def api(self, method: str, path: str, token: str, **kw) -> requests.Response:
        headers = {"Authorization": f"token {token}", **kw.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers, timeout=WAIT_S,
                                allow_redirects=False, **kw)

    def as_user(self, name: str, method: str, path: str, **kw) -> requests.Response:
        return self.api(method, path, self.tokens[name], **kw)

    def _token(self, name: str) -> str:
        r = self.api("POST", f"/hub/api/users/{name}/tokens", self.driver, json={"note": "test_hub"})
        assert r.status_code in (200, 201), f"no token for {name}: {r.status_code} {r.text}\n{self.log()}"
        return r.json()["token"]

    def start_server(self, name: str) -> None:
        r = self.as_user(name, "POST", f"/hub/api/users/{name}/server")
        assert r.status_code in (201, 202, 400), f"{name}'s server: {r.status_code} {r.text}"
        # 200 from the server itself: until the proxy routes /user/<name>/, the hub answers with a 302 (ok to
        # requests), and a request sent then lands on the hub's redirect, not on the server (seen on a busy machine).
        self._wait(lambda: self.as_user(name, "GET", f"/user/{name}/api/status").status_code == 200,
                   f"{name}'s server")

    def write(self, name: str, path: str, text: str) -> None:
        """Save a text file in the user's home, as JupyterLab's editor does (the contents API)."""
        r = self.as_user(name, "PUT", f"/user/{name}/api/contents/{path}",
                         json={"type": "file", "format": "text", "content": text})
        assert r.status_code in (200, 201), f"{name} could not save {path}: {r.status_code} {r.text}"

    def read(self, name: str, path: str) -> dict:
        r = self.as_user(name, "GET", f"/user/{name}/api/contents/{path}")
        assert r.ok, f"{name} could not open {path}: {r.status_code} {r.text}"
        return r.json()

    def terminal(self, name: str, command: str, timeout: float = 300) -> tuple[int, str]:
        """Type ``command`` in a new terminal of the user's server; (its exit status, what it printed)."""
        r = self.as_user(name, "POST", f"/user/{name}/api/terminals")
        assert r.ok, f"{name} could not open a terminal: {r.status_code} {r.text}"
        term = r.json()["name"]
        try:
            return asyncio.run(self._type(name, term, command, timeout))
        finally:
            self.as_user(name, "DELETE", f"/user/{name}/api/terminals/{term}")

    async def _type(self, name: str, term: str, command: str, timeout: float) -> tuple[int, str]:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        ws_url = self.url.replace("http", "ws", 1) + f"/user/{name}/terminals/websocket/{term}"
        ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {self.tokens[name]}"}))
        mark = uuid.uuid4().hex[:12]
        # The marker is printed in two halves so that the terminal's echo of the line never matches it.
        await ws.write_message(json.dumps(["stdin", f"{command}; echo {mark[:6]}''{mark[6:]}=$?\r"]))
        out, end = "", time.monotonic() + timeout
        while time.monotonic() < end:
            msg = await asyncio.wait_for(ws.read_message(), timeout=max(1.0, end - time.monotonic()))
            if msg is None:
                break
            kind, *rest = json.loads(msg)
            if kind == "stdout":
                out += rest[0]
                if f"{mark}=" in out:
                    tail = out.split(f"{mark}=", 1)[1]
                    digits = "".join(ch for ch in tail[:4] if ch.isdigit())
                    if digits and not tail[len(digits):len(digits) + 1].isdigit():
                        ws.close()
                        return int(digits), out.split(f"{mark}=", 1)[0]
        ws.close()
        raise AssertionError(f"{name}'s terminal did not finish `{command}` in {timeout} s:\n{out[-3000:]}")
