"""The learners' course folder, published beside the site: what a chapter's launched exercise notebook installs.

For each language of the course (English, Chinese), the publishing workflow runs

    python -m course_admin.publish.learner --site _build/html

which releases the learner tree (`course release --learner-tree DIR --book-url URL [--lang zh_CN]`, the release
tool's own export: everything learners receive and nothing of the instructor's) and zips it, files at the zip's root,
into ``<site>/learner/transformers-from-scratch-learner.zip`` (``-zh_CN.zip`` for the Chinese tree): beside the
book of the same version (``/learner/`` for main, ``/<tag>/learner/`` for a tag). The book's exercise buttons open a
notebook whose first cell unpacks it (course_admin/book/launch_buttons.py, ``ARTIFACT``: the same names, held together
by solutions/tests/publish/test_learner.py). The book's address comes from _config.yml's ``baseurl``, which
bookconfig.py set for this version; nothing is typed.

Before anything is written, the tree is checked on its own (``leaks``): no path of the instructor's (solutions/, the
book's sources, CI, nbgrader's configuration, the other languages' exercise folders) and no file whose bytes are
those of a file under solutions/ (a reference module shipped as a stub, a hidden case), but the learner's own files
solutions/learner/ (their README, Makefile, pyproject.toml, AGENTS.md). A tree with one is refused and nothing is
written. The zip is the same, byte for byte, for the same tree (sorted entries, one date).

Standard library only, as the rest of publish/; the release runs as a subprocess (``sys.executable -m
course_admin.release.release``): after `make install`, as in the workflow.
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .bookconfig import BASEURL

LANGUAGES = ("en", "zh_CN")
ARTIFACT = "learner/transformers-from-scratch-learner{suffix}.zip"  # launch_buttons.ARTIFACT: the same
# What no learner receives (release/learner_tree.py's INSTRUCTOR_ONLY, and what a checkout has besides)
INSTRUCTOR = ("solutions/", ".ci/", ".git/", ".github/", ".venv/", "nbgrader_config.py", "book/", "_config.yml",
              "_toc.yml", "_build/", "exercises_", "grades/")
OWN = "solutions/learner/"  # the learner's own versions of the instructor's files: shipped as they are
DATE = (2026, 1, 1, 0, 0, 0)


def artifact_name(lang: str = "en") -> str:
    """The artifact's path in the site: ``learner/transformers-from-scratch-learner[-<lang>].zip``."""
    return ARTIFACT.format(suffix="" if lang == "en" else f"-{lang}")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def instructor_digests(root: Path) -> dict[str, str]:
    """{sha256: path} of every file under ``root``/solutions/ that learners must not receive (all but OWN's)."""
    found = {}
    for path in sorted((root / "solutions").rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(OWN) and "__pycache__" not in path.parts and path.stat().st_size:
            found.setdefault(_digest(path), rel)
    return found


def tree_files(tree: Path) -> list[str]:
    """The files of a learner tree (relative posix paths, sorted), bytecode caches aside."""
    return sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def leaks(tree: Path, root: Path) -> list[str]:
    """One line for each file of ``tree`` that is the instructor's: by its path, or by its bytes (a copy of a file
    under ``root``/solutions/)."""
    secret = instructor_digests(root)
    found = []
    for rel in tree_files(tree):
        if rel.startswith(INSTRUCTOR):
            found.append(f"{rel}: an instructor's path ({', '.join(p for p in INSTRUCTOR if rel.startswith(p))})")
        elif (tree / rel).stat().st_size and (copy := secret.get(_digest(tree / rel))):
            found.append(f"{rel}: a copy of {copy}")
    return found


def write_zip(tree: Path, target: Path) -> list[str]:
    """Zip ``tree``'s files into ``target``, at the zip's root, sorted and dated alike; return their paths."""
    files = tree_files(tree)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel in files:
            info = zipfile.ZipInfo(rel, DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (tree / rel).read_bytes())
    return files


def book_url(config: Path) -> str | None:
    """This version's base URL from _config.yml (bookconfig.py wrote it); None when it is empty."""
    found = BASEURL.search(config.read_text(encoding="utf-8")) if config.is_file() else None
    value = found.group(0).split(":", 1)[1].strip().strip('"') if found else ""
    return value or None


def release_tree(root: Path, dest: Path, lang: str, url: str | None) -> None:
    """`course release --learner-tree dest` in ``lang``, with the book's address when there is one."""
    command = [sys.executable, "-m", "course_admin.release.release", "--root", str(root), "--learner-tree", str(dest)]
    command += (["--book-url", url] if url else []) + (["--lang", lang] if lang != "en" else [])
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def publish(root: Path, site: Path, url: str | None, languages: tuple[str, ...] = LANGUAGES) -> list[Path]:
    """Release, check and zip the learner tree of each language into ``site``; return the zips. Raises ValueError
    naming the instructor's files a tree holds (nothing written)."""
    written = []
    with tempfile.TemporaryDirectory(prefix="course-learner-") as tmp:
        for lang in languages:
            tree = Path(tmp) / lang
            release_tree(root, tree, lang, url)
            found = leaks(tree, root)
            if found:
                raise ValueError(f"the {lang} learner tree holds the instructor's files:\n  " + "\n  ".join(found))
            target = site / artifact_name(lang)
            write_zip(tree, target)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.publish.learner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, required=True, help="the built site (_build/html): zips go to learner/")
    parser.add_argument("--root", type=Path, default=Path("."), help="the course's repository (default: here)")
    parser.add_argument("--book-url", help="the book's address (default: _config.yml's baseurl, as bookconfig set it)")
    parser.add_argument("--lang", action="append", choices=LANGUAGES, help="one language (default: all)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    url = args.book_url or book_url(root / "_config.yml")
    try:
        zips = publish(root, args.site, url, tuple(args.lang or LANGUAGES))
    except (RuntimeError, ValueError) as error:
        print(f"publish: {error}", file=sys.stderr)
        return 2
    for path in zips:
        print(f"publish: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
