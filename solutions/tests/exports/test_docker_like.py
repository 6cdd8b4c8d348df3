"""docker_like.py, the Docker-like container of the Gradescope, hub and run-bounds tests: what it opens to other
uids is what the closed folder holds when the container starts. Needs root and a mount namespace."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from . import docker_like

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the Docker-like container is started as root")


@needs_root
def test_a_closed_folder_is_opened_with_what_it_holds_when_the_container_starts() -> None:
    """docker_like.opening lists a closed folder (pyenv's /root) when its shell runs, not when its lines are
    written, and stages nothing per entry in the scratch folder that every run of a module shares. A file
    another process removes after the lines are written is left out, and a folder that a test's Jupyter adds
    to /root between two runs (.ipython: the entries' places shift) is there. Each failed the container's
    start before (the mount of a file that was gone; a staged file where a folder now went), and
    run_autograder then found no results.json: on a fresh machine's CI, every Docker-like run after another
    test had made /root/.ipython.
    Each entry keeps its mode."""
    closed, scratch = Path(tempfile.mkdtemp(prefix="closed_")), Path(tempfile.mkdtemp(prefix="scratch_"))

    def seen(change) -> subprocess.CompletedProcess:
        lines = docker_like.opening([closed], scratch)
        change()
        shown = ["/bin/sh", "-c", f"cd {closed} && stat -c '%a %n' . * && cat link"]
        return subprocess.run(docker_like.in_mount_namespace(lines, shown), capture_output=True, text=True, timeout=60)

    def remove_one_add_one() -> None:
        (closed / "gone").unlink()
        (closed / "added").write_text("")
        os.chmod(closed / "added", 0o604)

    try:  # both outside pytest's tmp_path, itself in a closed folder: the scratch must stay in view
        (closed / "folder").mkdir(mode=0o755)
        (closed / "kept").write_text("kept\n")
        (closed / "gone").write_text("")
        (closed / "link").symlink_to("kept")
        os.chmod(closed / "kept", 0o640)
        os.chmod(scratch, 0o755)
        first = seen(remove_one_add_one)
        (closed / "a_folder").mkdir(mode=0o711)  # sorts first: every entry's place moves by one
        second = seen(lambda: None)
    finally:
        shutil.rmtree(closed, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    modes = {".": "755", "added": "604", "folder": "755", "kept": "640", "link": "777"}
    for proc, expected in ((first, modes), (second, {**modes, "a_folder": "711"})):
        assert proc.returncode == 0, proc.stderr
        assert dict(line.split(" ", 1)[::-1] for line in proc.stdout.splitlines()[:-1]) == expected, proc.stdout
        assert proc.stdout.endswith("kept\n")
