"""The learners' course folder published beside the site (course_admin/publish/learner.py) and the exercise buttons
that install it (course_admin/book/launch_buttons.py), without building anything: the zip's check on planted trees,
its bytes, the names both sides use, the links' form and the file they point at, the learner README's links, and
course_lib/provided/hosted.py's choices (what to install, which notebook to hand in) with Colab faked.

The notebook executed in a fresh environment from a real artifact: test_learner_launch.py (it pays an install)."""
from __future__ import annotations

import json
import sys
import types
import zipfile
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from course_admin.book import launch_buttons
from course_admin.publish import learner
from course_admin.release import learner_tree
from course_lib.provided import hosted
from course_lib.provided.layout import LAYOUT, REPO_ROOT, Layout

ORG, REPO = "example-org", "transformers-from-scratch"
REPOSITORY = f"https://github.com/{ORG}/{REPO}"
SITE = f"https://{ORG}.github.io/{REPO}/"
HUB = "https://hub.example.edu"
NAME = "ch02_attention"


def config(lang: str = "en", ref: str = "main", hub: str = HUB, base: str = SITE) -> SimpleNamespace:
    """The book's settings as the publishing workflow leaves them (bookconfig.py), for one edition."""
    return SimpleNamespace(course_repository_url=REPOSITORY, course_launch_branch="gh-pages",
                           course_source_branch=ref, course_jupyterhub_url=hub, html_baseurl=base, language=lang)


# ------------------------------------------------------------------ the zip and its check
def planted_tree(root: Path) -> Path:
    """A learner tree in miniature: a stub, a provided helper, an exercise, the learner's own README."""
    for rel, text in (("course_lib/attention.py", "def f():\n    raise NotImplementedError\n"),
                      ("course_lib/provided/check.py", "print('check')\n"), ("README.md", "# yours\n"),
                      (f"exercises/{NAME}/{NAME}.ipynb", "{}\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_a_clean_tree_has_no_leak_and_zips_the_same_twice(tmp_path: Path) -> None:
    tree = planted_tree(tmp_path / "tree")
    assert learner.leaks(tree, REPO_ROOT) == []
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    files = learner.write_zip(tree, first)
    learner.write_zip(tree, second)
    assert first.read_bytes() == second.read_bytes()  # the same tree, the same bytes
    with zipfile.ZipFile(first) as archive:
        assert archive.namelist() == files == learner.tree_files(tree)
        assert archive.read("course_lib/attention.py") == (tree / "course_lib/attention.py").read_bytes()


@pytest.mark.parametrize("plant", ["reference", "hidden", "renamed", "github"])
def test_a_planted_instructor_file_is_caught(tmp_path: Path, plant: str) -> None:
    tree = planted_tree(tmp_path / "tree")
    reference = LAYOUT.reference / "attention.py"
    hidden = LAYOUT.hidden_file("02")
    target, source = {"reference": ("course_lib/attention.py", reference),    # a solution shipped as the stub
                      "hidden": ("solutions/hidden/ch02.py", hidden),           # by its path
                      "renamed": ("tests/notes.txt", hidden),                   # by its bytes, under another name
                      "github": (".github/workflows/publish.yml", REPO_ROOT / ".github/workflows/publish.yml")}[plant]
    (tree / target).parent.mkdir(parents=True, exist_ok=True)
    (tree / target).write_bytes(source.read_bytes())
    found = learner.leaks(tree, REPO_ROOT)
    assert len(found) == 1 and found[0].startswith(f"{target}: ")
    if plant in ("reference", "renamed"):
        assert found[0].endswith(f"a copy of {Layout(REPO_ROOT).rel(source)}")


def test_the_learners_own_files_are_no_leak(tmp_path: Path) -> None:
    tree = planted_tree(tmp_path / "tree")
    for name in ("Makefile", "AGENTS.md"):  # shipped as solutions/learner/ has them
        (tree / name).write_bytes((REPO_ROOT / "solutions" / "learner" / name).read_bytes())
    assert learner.leaks(tree, REPO_ROOT) == []


def test_a_refused_tree_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def release(root: Path, dest: Path, lang: str, url: str | None) -> None:
        planted_tree(dest)
        (dest / "solutions" / "course_ref").mkdir(parents=True)
        (dest / "solutions" / "course_ref" / "x.py").write_text("x = 1\n")

    monkeypatch.setattr(learner, "release_tree", release)
    with pytest.raises(ValueError, match="solutions/course_ref/x.py"):
        learner.publish(REPO_ROOT, tmp_path / "site", None, ("en",))
    assert not (tmp_path / "site").exists()


def test_the_book_url_comes_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "_config.yml"
    path.write_text('html:\n  baseurl: ""\n', encoding="utf-8")
    assert learner.book_url(path) is None
    path.write_text(f'html:\n  baseurl: "{SITE}2027-spring/"\n', encoding="utf-8")
    assert learner.book_url(path) == f"{SITE}2027-spring/"


# ------------------------------------------------------------------ the exercise's launch
def test_the_button_installs_what_the_workflow_publishes() -> None:
    for lang in ("en", "zh_CN"):
        assert launch_buttons.artifact_url(SITE, lang) == SITE + learner.artifact_name(lang)
    assert learner.artifact_name("zh_CN") == "learner/transformers-from-scratch-learner-zh_CN.zip"


@pytest.mark.parametrize("lang,ref", [("en", "main"), ("zh_CN", "main"), ("en", "2027-spring"), ("zh_CN", "2027-spring")])
def test_the_links_open_the_file_the_page_writes(tmp_path: Path, lang: str, ref: str) -> None:
    base = SITE if ref == "main" else f"{SITE}{ref}/"
    settings = config(lang, ref, base=base + ("zh/" if lang != "en" else ""))  # as editions.py bases the Chinese
    # where this edition's build lands on the site branch: the version's folder, the Chinese edition's zh/ in it
    version = tmp_path / "site" / ("" if ref == "main" else ref)
    outdir = version / ("zh" if lang != "en" else "")
    app = SimpleNamespace(config=settings, outdir=str(outdir))
    context: dict = {}
    launch_buttons._on_exercise(app, "book/02_attention", "page.html", context, None)
    (group,) = context["header_buttons"]
    links = {link["text"].split(":")[0]: link["url"] for link in group["buttons"]}
    assert sorted(links) == ["Binder", "Colab", "JupyterHub"]
    written = tmp_path / "site"
    colab = urlsplit(links["Colab"])
    assert colab.netloc == "colab.research.google.com"
    prefix = f"/github/{ORG}/{REPO}/blob/gh-pages/"
    assert colab.path.startswith(prefix) and (written / colab.path.removeprefix(prefix)).is_file()
    binder = urlsplit(links["Binder"])
    assert (binder.netloc, binder.path) == ("mybinder.org", f"/v2/gh/{ORG}/{REPO}/gh-pages")
    assert (written / parse_qs(binder.query)["urlpath"][0].removeprefix("lab/tree/")).is_file()
    pull = urlsplit(links["JupyterHub"])
    query = parse_qs(pull.query)
    assert f"{pull.scheme}://{pull.netloc}{pull.path}" == f"{HUB}/hub/user-redirect/git-pull"
    assert query["repo"] == [REPOSITORY] and query["branch"] == ["gh-pages"]
    assert (written / query["urlpath"][0].removeprefix(f"lab/tree/{REPO}/")).is_file()  # nbgitpuller clones into REPO/
    launched = json.loads((written / colab.path.removeprefix(prefix)).read_text(encoding="utf-8"))
    released = json.loads(((REPO_ROOT / ("exercises" if lang == "en" else f"exercises_{lang}")) / NAME
                           / f"{NAME}.ipynb").read_text(encoding="utf-8"))
    assert launched["cells"][1:] == released["cells"]  # the released notebook, after one cell
    first = launched["cells"][0]["source"]
    assert json.dumps(base + learner.artifact_name(lang)) in first and 'hosted.ready("02")' in first
    assert "/content/drive" in first and "google.colab" in first
    compile(first, "launch-setup", "exec")


def test_no_exercise_button_without_the_repository_or_the_base_url_or_on_another_page() -> None:
    for settings, page in ((config(base=""), "book/02_attention"), (SimpleNamespace(**{**vars(config()),
                            "course_repository_url": ""}), "book/02_attention"), (config(), "book/intro")):
        assert launch_buttons.exercise_links(settings, page)[0] == []


def test_the_learner_readme_links_each_exercise_as_its_page_does(monkeypatch: pytest.MonkeyPatch) -> None:
    assert learner_tree.launch_settings(REPO_ROOT) is None  # the repository's _config.yml: empty, no link
    plain = learner_tree.chapter_table(REPO_ROOT, SITE)
    assert "colab" not in plain
    for lang in ("en", "zh_CN"):
        settings = config(lang)
        monkeypatch.setattr(learner_tree, "launch_settings", lambda root, lang, s=settings: s)
        table = learner_tree.chapter_table(REPO_ROOT, SITE, lang)
        row = next(line for line in table.splitlines() if line.startswith("| 02 |"))
        for link in launch_buttons.exercise_links(settings, "book/02_attention")[0]:
            assert f"[{link['text'].split(':')[0]}]({link['url']})" in row
        assert table.splitlines()[0].endswith(f" {learner_tree.TABLE_WORDS[lang][5]} |")


# ------------------------------------------------------------------ hosted.py: install and hand in
def test_only_what_the_chapter_needs_and_the_runtime_lacks_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    wanted = hosted.requirements(REPO_ROOT / "solutions" / "learner")
    assert set(hosted.BASE) | {n for needs in hosted.NEEDS.values() for n in needs} <= set(wanted)
    installed = {"torch", "numpy", "matplotlib", "tqdm"}

    def version(name: str) -> str:
        if name in installed:
            return "1"
        raise hosted.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(hosted.metadata, "version", version)
    learner_root = REPO_ROOT / "solutions" / "learner"
    assert hosted.missing("02", learner_root) == []
    assert hosted.missing("08", learner_root) == [wanted["snownlp"], wanted["scikit-learn"], wanted["safetensors"]]
    installed.discard("torch")
    assert hosted.missing("02", learner_root) == [wanted["torch"]]


def test_submit_hands_in_this_notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = Layout(tmp_path)
    (tmp_path / "exercises" / NAME).mkdir(parents=True)
    assert hosted.this_notebook("02", layout) is None  # not in Colab, no session: the folder's own
    opened = tmp_path / "elsewhere" / f"{NAME}.ipynb"  # Binder, a hub: the launched file the kernel runs for
    opened.parent.mkdir()
    opened.write_text("{}\n")
    monkeypatch.setenv("JPY_SESSION_NAME", str(opened))
    assert hosted.this_notebook("02", layout) == opened
    monkeypatch.setenv("JPY_SESSION_NAME", str(opened.with_name("other.ipynb")))
    assert hosted.this_notebook("02", layout) is None
    held = {"cells": [{"cell_type": "markdown", "source": "my answer"}]}  # Colab: the notebook the browser holds
    message = types.SimpleNamespace(blocking_request=lambda kind, request, timeout_sec: {"ipynb": held})
    colab = types.ModuleType("google.colab")
    colab._message = message  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab._message", message)
    saved = hosted.this_notebook("02", layout)
    assert saved == tmp_path / "submissions" / f"{NAME}.ipynb" and json.loads(saved.read_text()) == held
