"""What a process that reads a notebook pays before it does anything (nbgrader, nbformat, Jupyter Book, the hub):
`make install` leaves out rfc3987-syntax, jsonschema's optional IRI format checker, which compiles about 35 parsers
whenever jsonschema is imported (1.3 s of CPU a process here: nbgrader's start 2.5 s with it, 1.1 s without; the
suite starts about sixty such processes). Planted: a copy of the package on the path is imported, and caught.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from course_lib.provided.layout import REPO_ROOT

READ_A_NOTEBOOK = ("import sys, nbformat\nnbformat.validate(nbformat.v4.new_notebook())\n"
                   "print('rfc3987_syntax' in sys.modules)")


def imports_iri_parsers(extra_path: Path | None = None) -> bool:
    """Whether validating a notebook, in a fresh process of this environment, imports rfc3987_syntax."""
    env = {**os.environ, **({"PYTHONPATH": str(extra_path)} if extra_path else {})}
    done = subprocess.run([sys.executable, "-c", READ_A_NOTEBOOK], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip() == "True"


def test_reading_a_notebook_compiles_no_iri_parser() -> None:
    assert not imports_iri_parsers(), ("rfc3987-syntax is installed in this environment: the Makefile's install "
                                       "uninstalls it (.venv/bin/pip uninstall rfc3987-syntax)")


def test_a_planted_iri_checker_is_seen(tmp_path: Path) -> None:
    (tmp_path / "rfc3987_syntax").mkdir()
    (tmp_path / "rfc3987_syntax" / "__init__.py").write_text("def is_valid_syntax(rule, text):\n    return True\n",
                                                              encoding="utf-8")
    assert imports_iri_parsers(tmp_path)
