"""JupyterHub for one class of Transformers from Scratch, with nbgrader: copy this file to the hub (e.g.
/etc/jupyterhub/jupyterhub_config.py), set the class below, choose your authenticator, and run
``jupyterhub -f /etc/jupyterhub/jupyterhub_config.py`` as root (each user's server runs as that user).

Who can do what, as nbgrader's hub groups say it:

    nbgrader-<course>   learners and instructors: fetch, submit, fetch feedback
    formgrade-<course>  instructors and the grader account: open the formgrader, release, collect

The formgrader is a hub service named after the course (nbgrader's course list finds it by that name),
run as the grader account ``grader-<course>``, whose home holds the instructor's clone of the course
repository (the course directory: its nbgrader_config.py is the repository's). Nobody else can open it.
Every user reads /etc/jupyter/nbgrader_config.py (solutions/hub/nbgrader_config.py): the exchange and
nbgrader's JupyterHubAuthPlugin, which asks the hub for the user's groups, so a user outside the
course can fetch nothing.

solutions/tests/exports/test_hub.py runs this very file, adding only a test authenticator, loopback
ports and temporary folders: read it for the whole loop a class goes through.
"""
import os
import shutil
import sys

c = get_config()  # noqa: F821 - defined by JupyterHub when it reads this file

# The class: edit these lines (or set the variables in the hub's environment).
COURSE = os.environ.get("TFS_COURSE", "tfs")
INSTRUCTORS = os.environ.get("TFS_INSTRUCTORS", "teacher").split()
LEARNERS = os.environ.get("TFS_LEARNERS", "").split()  # e.g. "alice bob", the hub's user names
GRADER = f"grader-{COURSE}"  # a system account of its own; nobody logs in as it
GRADER_HOME = os.environ.get("TFS_GRADER_HOME", f"/home/{GRADER}")
COURSE_DIR = os.environ.get("TFS_COURSE_DIR", os.path.join(GRADER_HOME, "transformers-from-scratch"))
FORMGRADER_PORT = int(os.environ.get("TFS_FORMGRADER_PORT", "9999"))
SINGLEUSER = shutil.which("jupyterhub-singleuser") or os.path.join(os.path.dirname(sys.executable),
                                                                   "jupyterhub-singleuser")

# Each user's server runs as that user, on this machine (DockerSpawner or KubeSpawner instead for a
# big class: the groups, roles and service below stay the same). Pick your authenticator here.
c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
c.Spawner.default_url = "/lab"
c.Authenticator.allowed_users = {*INSTRUCTORS, *LEARNERS, GRADER}

c.JupyterHub.load_groups = {
    f"nbgrader-{COURSE}": {"users": [*INSTRUCTORS, *LEARNERS]},
    f"formgrade-{COURSE}": {"users": [*INSTRUCTORS, GRADER]},
}
c.JupyterHub.load_roles = [
    # A server's token acts for its user: nbgrader's extensions read the user's groups with it.
    {"name": "server", "scopes": ["inherit"]},
    # Members see the course's service in the course list (nbgrader finds the course that way).
    {"name": f"nbgrader-{COURSE}", "groups": [f"nbgrader-{COURSE}"],
     "scopes": ["list:services", f"read:services!service={COURSE}"]},
    # Only instructors (and the grader account) may open the formgrader.
    {"name": f"formgrade-{COURSE}", "groups": [f"formgrade-{COURSE}"],
     "scopes": [f"access:services!service={COURSE}", "list:services", f"read:services!service={COURSE}"]},
    # The formgrader enrols each learner it grades in nbgrader-<course> (nbgrader's gradebook does).
    {"name": f"formgrader-{COURSE}", "services": [COURSE],
     "scopes": ["list:groups", f"read:groups!group=nbgrader-{COURSE}", f"groups!group=nbgrader-{COURSE}",
                f"read:users:groups!user={GRADER}"]},
]
c.JupyterHub.services = [{
    "name": COURSE,
    "url": f"http://127.0.0.1:{FORMGRADER_PORT}",
    "command": [SINGLEUSER, f"--ServerApp.root_dir={GRADER_HOME}"],
    "user": GRADER,
    "cwd": COURSE_DIR,  # nbgrader reads the course's nbgrader_config.py from here
    "environment": {"JUPYTERHUB_DEFAULT_URL": "/formgrader", "JUPYTERHUB_USER": GRADER},
    "oauth_no_confirm": True,
}]
