"""The published site, assembled from one build of the book: the main build at the root, each tag (a term, say
``2027-spring``) under ``/<tag>/``, both editions in each (Chinese under ``zh/``), and a version switch on every page.

GitHub Pages deploys one artifact, the whole site, so each deploy must carry the versions published before it. The
site lives on a branch (``gh-pages``, where the book's launch buttons already look for its notebooks): the publishing
workflow checks it out, runs this module on it and pushes it back, then deploys it. A deploy of

  main   replaces everything at the root but the tags' folders (the ones ``versions.json`` lists);
  a tag  replaces its own folder only; the root and the other tags stay as they were.

Then ``versions.json`` (the list of versions, newest tag first after main), ``versions.html`` (the same list as a
page, for a reader without scripts), ``_version/switch.js`` and ``binder/environment.yml`` (what Binder builds its
image from: PyTorch's CPU build) are written at the root, and each page of the version
just copied gets the switch: a labelled ``<nav>`` with a disclosure (``<details>``) of links to the same page in
every version, keyboard usable with no script; the script refreshes that list from ``versions.json``, so a tag's
pages, written once, list the versions published after them. The build itself (``--html``) is never changed.

    python -m course_admin.publish.site --html _build/html --site _site --version main|TAG
"""
from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
from pathlib import Path

MAIN = "main"
VERSIONS = "versions.json"
SWITCH_DIR = "_version"
BINDER = "binder"  # what Binder builds its image from, on the branch every launch button names
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
# the conda-forge package of each requirement Binder's image needs before a notebook's first cell runs
CONDA_NAMES = {"torch": "pytorch-cpu", "numpy": "numpy", "matplotlib": "matplotlib"}
START, END = "<!-- course-version-switch -->", "<!-- /course-version-switch -->"
TAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# names a tag may not take: the editions' and the root's own entries, and the folders publish.yml adds to the
# build (pdf/: the PDFs; learner/: the learners' course folder, course_admin/publish/learner.py), and binder/
RESERVED = {MAIN, "zh", "index.html", VERSIONS, "versions.html", "pdf", "learner", BINDER}
WORDS = {"en": {"nav": "Book versions", "version": "Version", "latest": "latest", "all": "All versions"},
         "zh": {"nav": "本书的版本", "version": "版本", "latest": "最新", "all": "全部版本"}}


class SiteError(ValueError):
    """Input the site cannot be assembled from: a bad tag name, a missing build, a clash of names."""


def check_version(version: str) -> str:
    """``version`` when it can be a folder of the site (``main``, or a tag such as ``2027-spring``); else SiteError."""
    if version == MAIN:
        return version
    if "/" in version or "\\" in version or ".." in version or not TAG_NAME.fullmatch(version):
        raise SiteError(f"tag {version!r} cannot be published: a tag is published as a folder of the site, so its name "
                        "must be letters, digits, '.', '_' or '-' (up to 64, no '/' and no '..'), e.g. 2027-spring")
    if version in RESERVED or version.startswith("_"):
        raise SiteError(f"tag {version!r} cannot be published: the site already uses that name "
                        f"({', '.join(sorted(RESERVED))}, and names starting with '_')")
    return version


def read_versions(site: Path) -> list[str]:
    """The tags published so far, newest first, from the site's versions.json (none on a first deploy)."""
    path = site / VERSIONS
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [v["name"] for v in data.get("versions", []) if v.get("name") != MAIN]


def versions_data(tags: list[str]) -> dict:
    """What versions.json holds: main first (the site's root), then the tags, each with its path from the root."""
    return {"versions": [{"name": MAIN, "path": ""}] + [{"name": t, "path": f"{t}/"} for t in tags]}


def place(build: Path, site: Path, version: str, tags: list[str]) -> Path:
    """Copy ``build`` to the version's place in ``site``; returns that folder. Main keeps the tags' folders."""
    if version == MAIN:
        clash = sorted(p.name for p in build.iterdir() if p.name in tags)
        if clash:
            raise SiteError(f"the main build has {', '.join(clash)} at its root, a published tag's folder: rename it")
        site.mkdir(parents=True, exist_ok=True)
        for entry in site.iterdir():
            if entry.name in tags or entry.name.startswith("."):  # the tags, and the branch's .git
                continue
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        shutil.copytree(build, site, dirs_exist_ok=True)
        return site
    target = site / version
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(build, target)
    return target


def switch_html(version: str, tags: list[str], page: str, up: str) -> str:
    """The switch of one page: ``page`` is its path inside the version (``zh/book/x.html``), ``up`` the way up
    from it to the site's root (``../../``)."""
    zh = page.startswith("zh/")
    words = WORDS["zh" if zh else "en"]
    latest = f"{MAIN}（{words['latest']}）" if zh else f"{MAIN} ({words['latest']})"
    items = []
    for name in [MAIN, *tags]:
        label = latest if name == MAIN else name
        href = up + ("" if name == MAIN else f"{name}/") + page
        current = ' aria-current="page"' if name == version else ""
        items.append(f'<li><a href="{html.escape(href)}"{current}>{html.escape(label)}</a></li>')
    colon = "：" if zh else ": "
    return (f'{START}\n<nav class="course-versions d-print-none" aria-label="{words["nav"]}" '
            f'data-version="{html.escape(version)}" data-page="{html.escape(page)}" data-root="{up}" '
            'style="position:fixed;right:1rem;bottom:1rem;z-index:1030;background:#fff;color:#111;'
            'border:1px solid #555;border-radius:.25rem;padding:.25rem .5rem;font-size:.875rem">\n'
            f'<details><summary>{words["version"]}{colon}{html.escape(version)}</summary>\n'
            f'<ul style="list-style:none;margin:.25rem 0;padding:0">{"".join(items)}'
            f'<li><a href="{up}versions.html">{words["all"]}</a></li></ul></details>\n</nav>\n'
            f'<script src="{up}{SWITCH_DIR}/switch.js" defer></script>\n{END}\n')


def inject(page: Path, version: str, tags: list[str], rel: str, up: str) -> bool:
    """Put the switch before the page's last ``</body>`` (a redirect page without one is left alone)."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(re.escape(START) + r".*?" + re.escape(END) + r"\n?", "", text, flags=re.DOTALL)
    at = text.rfind("</body>")
    if at < 0:
        return False
    page.write_text(text[:at] + switch_html(version, tags, rel, up) + text[at:], encoding="utf-8")
    return True


SCRIPT = """// The version switch (course_admin/publish/site.py): the list of versions refreshed from versions.json.
(function () {
  var nav = document.querySelector("nav.course-versions");
  if (!nav || !window.fetch) return;
  var root = nav.getAttribute("data-root"), page = nav.getAttribute("data-page");
  var current = nav.getAttribute("data-version"), list = nav.querySelector("ul");
  var zh = page.indexOf("zh/") === 0;
  fetch(root + "versions.json").then(function (r) { return r.ok ? r.json() : null; }).then(function (data) {
    if (!data || !data.versions) return;
    var all = list.lastElementChild;
    list.textContent = "";
    data.versions.forEach(function (v) {
      var li = document.createElement("li"), a = document.createElement("a");
      a.href = root + v.path + page;
      a.textContent = v.name === "main" ? (zh ? "main（最新）" : "main (latest)") : v.name;
      if (v.name === current) a.setAttribute("aria-current", "page");
      li.appendChild(a);
      list.appendChild(li);
    });
    list.appendChild(all);
  }).catch(function () {});
})();
"""


def versions_page(tags: list[str]) -> str:
    """versions.html: every version, both editions, for a reader without scripts."""
    rows = "".join(f'<li><a href="{"" if n == MAIN else n + "/"}index.html">{n}</a> · '
                   f'<a href="{"" if n == MAIN else n + "/"}zh/index.html" lang="zh-CN">中文版</a></li>\n'
                   for n in [MAIN, *tags])
    return ('<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Versions of the book</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1"></head>\n<body><main>\n'
            '<h1>Versions of the book <span lang="zh-CN">（本书的版本）</span></h1>\n'
            f'<p>main is the latest; each term\'s book stays as it was published.</p>\n<ul>\n{rows}</ul>\n'
            '</main></body>\n</html>\n')


def binder_environment(pyproject: str) -> str:
    """binder/environment.yml for the site's branch: PyTorch's CPU build (conda-forge's pytorch-cpu), NumPy and
    Matplotlib at the course's lower bounds (``pyproject``'s dependencies), so that a launched notebook's first cell
    installs only the course's folder; pip would otherwise take PyTorch's multi-GB CUDA build on Binder."""
    block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", pyproject, re.MULTILINE | re.DOTALL)
    wanted = dict(re.findall(r'^\s*"([A-Za-z0-9_.-]+)\s*([^";]*)', block.group(1) if block else "", re.MULTILINE))
    lacking = sorted(set(CONDA_NAMES) - set(wanted))
    if lacking:
        raise SiteError(f"pyproject.toml's dependencies do not name {', '.join(lacking)}: Binder's image needs them")
    python = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject, re.MULTILINE)
    lines = [f"  - python{python.group(1) if python else ''}"]
    lines += [f"  - {CONDA_NAMES[name]}{wanted[name].replace(' ', '')}" for name in CONDA_NAMES] + ["  - pip"]
    return ("# Binder's image for the course's notebooks (written by course_admin/publish/site.py from pyproject.toml):\n"
            "# PyTorch's CPU build, so that a notebook's first cell installs only the course's folder.\n"
            "name: transformers-from-scratch\nchannels:\n  - conda-forge\ndependencies:\n" + "\n".join(lines) + "\n")


def assemble(build: Path, site: Path, version: str) -> list[str]:
    """Publish ``build`` as ``version`` in ``site`` (see the module's docstring); returns the tags now published."""
    check_version(version)
    if not (build / "index.html").is_file():
        raise SiteError(f"{build} is not a built book (no index.html): run make book first")
    tags = read_versions(site)
    if version != MAIN and version not in tags:
        if (site / version).exists():
            raise SiteError(f"tag {version!r} cannot be published: the main build has {version!r} at the site's root")
        tags.insert(0, version)
    folder = place(build, site, version, tags)
    for page in sorted(folder.rglob("*.html")):
        rel = page.relative_to(folder).as_posix()
        if version == MAIN and rel.split("/", 1)[0] in tags:
            continue  # a tag's page, already published
        up = "../" * (len(page.relative_to(site).parts) - 1)
        inject(page, version, tags, rel, up)
    (site / VERSIONS).write_text(json.dumps(versions_data(tags), indent=1) + "\n", encoding="utf-8")
    (site / "versions.html").write_text(versions_page(tags), encoding="utf-8")
    (site / SWITCH_DIR).mkdir(exist_ok=True)
    (site / SWITCH_DIR / "switch.js").write_text(SCRIPT, encoding="utf-8")
    (site / BINDER).mkdir(exist_ok=True)
    (site / BINDER / "environment.yml").write_text(binder_environment(PYPROJECT.read_text(encoding="utf-8")),
                                                    encoding="utf-8")
    return tags


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.publish.site", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, required=True, help="the built book (make book's _build/html)")
    parser.add_argument("--site", type=Path, required=True, help="the site so far (a checkout of gh-pages), changed")
    parser.add_argument("--version", required=True, help="main, or the tag being published (e.g. 2027-spring)")
    args = parser.parse_args(argv)
    try:
        tags = assemble(args.html, args.site, args.version)
    except SiteError as error:
        print(f"publish: {error}", file=sys.stderr)
        return 2
    where = "the root" if args.version == MAIN else f"{args.version}/"
    print(f"publish: {args.version} at {where} of {args.site}; versions: {', '.join([MAIN, *tags])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
