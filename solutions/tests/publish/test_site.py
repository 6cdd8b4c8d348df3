"""The published site assembled from a tiny fake build (course_admin/publish/site.py): main at the root, a tag under
its own folder, both editions in each, the version switch on every page, earlier tags kept, bad tags refused."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_admin.publish import site
from course_admin.publish.site import SiteError, assemble

PAGE = ('<!DOCTYPE html>\n<html lang="{lang}"><head><title>{title}</title></head>\n<body>\n<main>{title}</main>\n'
        '<!-- Scripts loaded after <body> so the DOM is not blocked -->\n</body>\n</html>\n')
REDIRECT = '<meta http-equiv="Refresh" content="0; url=book/intro.html" />\n'


def fake_build(root: Path, words: str = "build one") -> Path:
    """A built book in miniature: both editions, a redirect index each, a page each, a static file."""
    for edition, lang in (("", "en"), ("zh/", "zh-CN")):
        (root / edition / "book").mkdir(parents=True, exist_ok=True)
        (root / edition / "index.html").write_text(REDIRECT, encoding="utf-8")
        (root / edition / "book" / "intro.html").write_text(PAGE.format(lang=lang, title=f"{words} {lang}"),
                                                           encoding="utf-8")
    (root / "_static").mkdir(exist_ok=True)
    (root / "_static" / "theme.css").write_text("body {}\n", encoding="utf-8")
    return root


def links(page: Path) -> list[str]:
    """The hrefs of the version switch of ``page``."""
    text = page.read_text(encoding="utf-8")
    block = text[text.index(site.START):text.index(site.END)]
    return re.findall(r'<a href="([^"]+)"', block)


def test_main_then_a_tag_end_up_where_they_should(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assemble(fake_build(tmp_path / "main"), out, "main")
    assemble(fake_build(tmp_path / "tag", "spring build"), out, "2027-spring")
    assert "build one en" in (out / "book" / "intro.html").read_text(encoding="utf-8")
    assert "build one zh-CN" in (out / "zh" / "book" / "intro.html").read_text(encoding="utf-8")
    assert "spring build en" in (out / "2027-spring" / "book" / "intro.html").read_text(encoding="utf-8")
    assert "spring build zh-CN" in (out / "2027-spring" / "zh" / "book" / "intro.html").read_text(encoding="utf-8")
    assert (out / "2027-spring" / "_static" / "theme.css").is_file()
    data = json.loads((out / "versions.json").read_text(encoding="utf-8"))
    assert data["versions"] == [{"name": "main", "path": ""}, {"name": "2027-spring", "path": "2027-spring/"}]
    assert (out / "_version" / "switch.js").is_file() and "2027-spring/" in (out / "versions.html").read_text()


def test_the_switch_lists_both_and_links_the_same_page(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assemble(fake_build(tmp_path / "main"), out, "main")
    assemble(fake_build(tmp_path / "tag"), out, "2027-spring")
    tag_zh = out / "2027-spring" / "zh" / "book" / "intro.html"
    assert links(tag_zh) == ["../../../zh/book/intro.html", "../../../2027-spring/zh/book/intro.html",
                             "../../../versions.html"]
    text = tag_zh.read_text(encoding="utf-8")
    assert 'aria-label="本书的版本"' in text and "<summary>版本：2027-spring</summary>" in text
    assert ">main（最新）</a>" in text and ">全部版本</a>" in text
    assert re.search(r'<a href="../../../2027-spring/zh/book/intro.html" aria-current="page">', text)
    assert 'src="../../../_version/switch.js"' in text
    # the switch goes before the page's closing </body>, not after the comment that names <body>
    assert text.index(site.END) < text.rindex("</body>") and text.index("not blocked") < text.index(site.START)
    english = (out / "2027-spring" / "book" / "intro.html").read_text(encoding="utf-8")
    assert 'aria-label="Book versions"' in english and "<summary>Version: 2027-spring</summary>" in english
    assert ">main (latest)</a>" in english and ">All versions</a>" in english
    # a redirect page has no body: left as it was
    assert (out / "2027-spring" / "index.html").read_text(encoding="utf-8") == REDIRECT


def test_an_earlier_tag_survives_a_new_main_deploy(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assemble(fake_build(tmp_path / "main"), out, "main")
    assemble(fake_build(tmp_path / "tag", "spring build"), out, "2027-spring")
    (out / "book" / "gone.html").write_text("<body></body>", encoding="utf-8")  # a page main no longer builds
    (out / ".git").mkdir()  # the branch's checkout
    tags = assemble(fake_build(tmp_path / "main2", "build two"), out, "main")
    assert tags == ["2027-spring"]
    assert "spring build en" in (out / "2027-spring" / "book" / "intro.html").read_text(encoding="utf-8")
    assert links(out / "2027-spring" / "book" / "intro.html")[1] == "../../2027-spring/book/intro.html"
    assert "build two en" in (out / "book" / "intro.html").read_text(encoding="utf-8")
    assert not (out / "book" / "gone.html").exists() and (out / ".git").is_dir()
    assert links(out / "book" / "intro.html") == ["../book/intro.html", "../2027-spring/book/intro.html",
                                                   "../versions.html"]
    assemble(fake_build(tmp_path / "tag2"), out, "2027-autumn")
    assert [v["name"] for v in json.loads((out / "versions.json").read_text())["versions"]] == \
        ["main", "2027-autumn", "2027-spring"]


def test_the_build_itself_is_never_edited(tmp_path: Path) -> None:
    build = fake_build(tmp_path / "main")
    before = (build / "book" / "intro.html").read_text(encoding="utf-8")
    assemble(build, tmp_path / "site", "main")
    assert (build / "book" / "intro.html").read_text(encoding="utf-8") == before
    assert site.START in (tmp_path / "site" / "book" / "intro.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("tag", ["term/2027", "../2027", "2027..x", "", "-x", "zh", "_static", "_launch", "versions.json",
                                 "pdf", "learner", "a b"])
def test_a_bad_tag_is_refused_with_a_clear_message(tmp_path: Path, tag: str) -> None:
    with pytest.raises(SiteError, match="cannot be published"):
        assemble(fake_build(tmp_path / "main"), tmp_path / "site", tag)
    assert not (tmp_path / "site").exists()


def test_the_command_line_says_why_it_refused(tmp_path: Path) -> None:
    build = fake_build(tmp_path / "main")
    done = subprocess.run([sys.executable, "-m", "course_admin.publish.site", "--html", str(build), "--site",
                           str(tmp_path / "site"), "--version", "term/2027"], capture_output=True, text=True)
    assert done.returncode == 2 and "no '/'" in done.stderr and "e.g. 2027-spring" in done.stderr
    done = subprocess.run([sys.executable, "-m", "course_admin.publish.site", "--html", str(tmp_path / "none"),
                           "--site", str(tmp_path / "site"), "--version", "main"], capture_output=True, text=True)
    assert done.returncode == 2 and "run make book first" in done.stderr


def test_a_tag_named_like_a_folder_of_main_is_refused(tmp_path: Path) -> None:
    build = fake_build(tmp_path / "main")
    (build / "book2").mkdir()
    assemble(build, tmp_path / "site", "main")
    with pytest.raises(SiteError, match="main build has 'book2'"):
        assemble(fake_build(tmp_path / "tag"), tmp_path / "site", "book2")


def run_publish_step(clone: Path, version: str, ref_type: str = "branch") -> subprocess.CompletedProcess:
    """The publish job's script, taken from publish.yml, run in ``clone`` as the job runs it (bash -e)."""
    import yaml

    from course_lib.provided.layout import REPO_ROOT

    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "publish.yml").read_text(encoding="utf-8"))
    script = next(s["run"] for s in workflow["jobs"]["publish"]["steps"] if "run" in s)
    env = {"PATH": os.environ["PATH"], "HOME": str(clone.parent), "VERSION": version, "GITHUB_REF_TYPE": ref_type,
           "GITHUB_SHA": "0" * 40, "SITE_BRANCH": workflow["env"]["SITE_BRANCH"], "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["bash", "-e", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_publish_job_keeps_the_site_on_its_branch(tmp_path: Path) -> None:
    """A dry run of the publish job's script on a local remote: the branch is started, a tag added, main again."""
    from course_lib.provided.layout import REPO_ROOT

    def git(*args: str, cwd: Path = tmp_path) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                              capture_output=True, text=True).stdout

    git("init", "-q", "--bare", "-b", "main", "remote.git")
    clone = tmp_path / "clone"
    package = Path("solutions", "course_admin", "publish")
    shutil.copytree(REPO_ROOT / package, clone / package, ignore=shutil.ignore_patterns("__pycache__"))
    (clone / "solutions" / "course_admin" / "__init__.py").write_text('"""course_admin"""\n', encoding="utf-8")
    shutil.copyfile(REPO_ROOT / "pyproject.toml", clone / "pyproject.toml")  # Binder's image is read from it
    (clone / ".gitignore").write_text("_build/\n_site/\n", encoding="utf-8")
    git("init", "-q", "-b", "main", str(clone))
    git("add", ".", cwd=clone)
    git("commit", "-q", "-m", "course", cwd=clone)
    git("remote", "add", "origin", str(tmp_path / "remote.git"), cwd=clone)
    git("push", "-q", "origin", "main", cwd=clone)
    for version, words in (("main", "build one"), ("2027-spring", "spring build"), ("main", "build two")):
        shutil.rmtree(clone / "_build", ignore_errors=True)
        fake_build(clone / "_build" / "html", words)
        done = run_publish_step(clone, version, "tag" if version != "main" else "branch")
        assert done.returncode == 0, done.stdout + done.stderr
    files = git("ls-tree", "-r", "--name-only", "gh-pages", cwd=tmp_path / "remote.git").split()
    assert {"book/intro.html", "zh/book/intro.html", "2027-spring/book/intro.html", "2027-spring/zh/book/intro.html",
            "versions.json", "_version/switch.js"} <= set(files)
    assert "build two en" in git("show", "gh-pages:book/intro.html", cwd=tmp_path / "remote.git")
    assert "spring build en" in git("show", "gh-pages:2027-spring/book/intro.html", cwd=tmp_path / "remote.git")
    assert len(git("log", "--format=%s", "gh-pages", cwd=tmp_path / "remote.git").splitlines()) == 3
    refused = run_publish_step(clone, "main", "tag")
    assert refused.returncode == 1 and "a tag named main cannot be published" in refused.stdout


HARNESS = """
const items = [];
const all = {href: "../versions.html"};
const list = {get lastElementChild() { return items[items.length - 1]; },
              set textContent(v) { items.length = 0; }, appendChild(x) { items.push(x); }};
const attrs = {"data-root": "../", "data-page": process.argv[2], "data-version": "2027-spring"};
const nav = {getAttribute: (k) => attrs[k], querySelector: () => list};
items.push(all);
global.window = {fetch: true};
const data = JSON.parse(require("fs").readFileSync(process.argv[3]));
global.fetch = (url) => Promise.resolve({ok: url === "../versions.json", json: () => data});
global.document = {querySelector: () => nav, createElement: (tag) => ({tag, children: [], attrs: {},
  appendChild(x) { this.children.push(x); }, setAttribute(k, v) { this.attrs[k] = v; }})};
eval(require("fs").readFileSync(process.argv[4], "utf8"));
setTimeout(() => console.log(JSON.stringify(items.map((li) => li.children ? [li.children[0].href,
  li.children[0].textContent, li.children[0].attrs["aria-current"] || ""] : li.href))), 50);
"""


@pytest.mark.skipif(not shutil.which("node"), reason="node not installed: the switch's script is not run")
def test_the_script_lists_the_versions_published_later(tmp_path: Path) -> None:
    """An early tag's page learns of later versions: switch.js, run in node on a stub page, rebuilds the list."""
    out = tmp_path / "site"
    assemble(fake_build(tmp_path / "main"), out, "main")
    assemble(fake_build(tmp_path / "tag"), out, "2027-spring")
    assemble(fake_build(tmp_path / "tag2"), out, "2027-autumn")
    (tmp_path / "harness.js").write_text(HARNESS, encoding="utf-8")
    done = subprocess.run(["node", str(tmp_path / "harness.js"), "zh/book/intro.html", str(out / "versions.json"),
                           str(out / "_version" / "switch.js")], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["../zh/book/intro.html", "main（最新）", ""],
                                       ["../2027-autumn/zh/book/intro.html", "2027-autumn", ""],
                                       ["../2027-spring/zh/book/intro.html", "2027-spring", "page"],
                                       "../versions.html"]


def test_binder_builds_the_cpu_pytorch_at_the_course_s_own_bounds(tmp_path: Path) -> None:
    """binder/environment.yml at the site's root, after main and after a tag: conda-forge's CPU PyTorch (pip on
    Binder would take the CUDA build), each lower bound the one pyproject.toml's dependencies give."""
    import tomllib

    assemble(fake_build(tmp_path / "main"), tmp_path / "site", "main")
    assemble(fake_build(tmp_path / "tag"), tmp_path / "site", "2027-spring")
    env = yaml_load((tmp_path / "site" / "binder" / "environment.yml").read_text(encoding="utf-8"))
    project = tomllib.loads(site.PYPROJECT.read_text(encoding="utf-8"))["project"]
    bounds = {re.split(r"[<>=!~ ]", d, maxsplit=1)[0]: d[len(re.split(r"[<>=!~ ]", d, maxsplit=1)[0]):].strip()
              for d in project["dependencies"]}
    assert env["channels"] == ["conda-forge"]
    assert env["dependencies"] == [f"python{project['requires-python']}", f"pytorch-cpu{bounds['torch']}",
                                   f"numpy{bounds['numpy']}", f"matplotlib{bounds['matplotlib']}", "pip"]
    assert "torch" not in env["dependencies"]                     # never pip's default (CUDA) wheel


def test_a_pyproject_without_torch_cannot_make_binder_s_image() -> None:
    planted = site.PYPROJECT.read_text(encoding="utf-8").replace('"torch', '"tourch')
    with pytest.raises(SiteError, match="do not name torch"):
        site.binder_environment(planted)


def yaml_load(text: str) -> dict:
    import yaml
    return yaml.safe_load(text)
