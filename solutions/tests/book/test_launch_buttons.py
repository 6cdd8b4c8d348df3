"""Launch buttons (solutions/course_admin/book/launch_buttons.py): a tiny book of two executed pages, built with the book's
own extension, carries Colab, Binder and JupyterHub links and launch notebooks when the course's
repository URL is set, and no link to any of them, and no launch notebook, when it is empty (the default
of _config.yml, so the offline book links nowhere).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course_lib.provided.layout import REPO_ROOT

REPO = "https://github.com/example-org/transformers-from-scratch"
HUB = "https://hub.example.edu"
SITE = "https://example-org.github.io/transformers-from-scratch/"
PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# {title}

```{{code-cell}} ipython3
{code}
```
"""
SERVICES = ("colab.research.google.com", "mybinder.org", "git-pull?")


def build(root: Path, settings: dict[str, str], extensions: tuple[str, ...] = ("launch_buttons",),
          code: str = "print(6 * 7)") -> Path:
    """Build a two-page book at ``root`` whose pages run ``code``, with the book's ``extensions`` and
    ``settings``, warnings as errors; return its HTML folder."""
    (root / "book").mkdir(parents=True)
    for name, title in (("02_attention", "2. Attention"), ("08_capstone", "8. Capstone")):
        (root / "book" / f"{name}.md").write_text(PAGE.format(title=title, code=code), encoding="utf-8")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/02_attention\nchapters:\n  - file: book/08_capstone\n")
    config = {"title": "tiny", "only_build_toc_files": True, "execute": {"execute_notebooks": "force", "stderr_output": "warn"},
              "sphinx": {"extra_extensions": [f"course_admin.book.{name}" for name in extensions],
                         "config": settings}}
    (root / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--path-output",
                           str(root), "--warningiserror"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "_build" / "html"


def test_the_books_setting_is_empty_by_default() -> None:
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert "course_admin.book.launch_buttons" in config["sphinx"]["extra_extensions"]
    assert config["sphinx"]["config"]["course_repository_url"] == ""


@pytest.mark.slow
def test_links_when_set_and_none_when_not(tmp_path: Path) -> None:
    html = build(tmp_path / "with", {"course_repository_url": REPO, "course_jupyterhub_url": HUB,
                                     "html_baseurl": SITE})
    page = (html / "book" / "02_attention.html").read_text(encoding="utf-8")
    # the chapter's exercise too (solutions/tests/publish/test_learner.py: the links' form, the notebook run offline)
    assert ("https://colab.research.google.com/github/example-org/transformers-from-scratch/blob/gh-pages/"
            "_launch/exercises/ch02_attention.ipynb") in page
    exercise = json.loads((html / "_launch" / "exercises" / "ch02_attention.ipynb").read_text(encoding="utf-8"))
    assert f'"{SITE}learner/transformers-from-scratch-learner.zip"' in "".join(exercise["cells"][0]["source"])
    assert ("https://colab.research.google.com/github/example-org/transformers-from-scratch/blob/gh-pages/"
            "_launch/02_attention.ipynb") in page
    assert ("https://mybinder.org/v2/gh/example-org/transformers-from-scratch/gh-pages?urlpath=lab/tree/"
            "_launch/02_attention.ipynb") in page
    assert f"{HUB}/hub/user-redirect/git-pull?repo=https%3A//github.com/example-org/transformers-from-scratch" in page
    launched = json.loads((html / "_launch" / "02_attention.ipynb").read_text(encoding="utf-8"))
    first = "".join(launched["cells"][0]["source"])
    assert "pip" in first and "install" in first and REPO in first
    (code,) = [c for c in launched["cells"][1:] if c["cell_type"] == "code"]
    assert "print(6 * 7)" in "".join(code["source"]) and code["outputs"] == []  # the page's cell, not its output
    assert "accelerator" not in launched["metadata"]
    capstone = json.loads((html / "_launch" / "08_capstone.ipynb").read_text(encoding="utf-8"))
    assert capstone["metadata"]["accelerator"] == "GPU"  # Colab opens it on a GPU runtime

    html = build(tmp_path / "without", {"course_repository_url": ""})
    for name in ("02_attention", "08_capstone"):
        page = (html / "book" / f"{name}.html").read_text(encoding="utf-8")
        assert "42" in page  # the page was built and executed
        assert not [s for s in SERVICES if s in page], "a launch link in the offline book"
    assert not (html / "_launch").exists()  # neither the pages' notebooks nor the exercises'
