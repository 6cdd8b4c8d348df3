"""The book's settings for the repository it is published from, written into the publishing runner's checkout.

The book reads its launch buttons' repository (``course_repository_url``), the site's base URL (``html: baseurl``)
and the branch or tag a launched notebook installs the course from (``course_source_branch``) from _config.yml,
where they are empty in the repository (the offline book links nowhere). The publishing workflow calls this
module on its own clean checkout, before ``make book``, with values it takes from the repository
(``github.server_url``/``github.repository``, the base URL that actions/configure-pages reports, the tag being
published): nothing is typed by hand and nothing is committed. It changes those lines only, and refuses when it
cannot find one (a _config.yml whose layout changed fails the workflow here, not silently on the site).

    python -m course_admin.publish.bookconfig --repository-url URL --base-url URL [--source-ref TAG]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from .site import MAIN, SiteError, check_version

REPOSITORY = re.compile(r'^(?P<indent>[ \t]+)course_repository_url: "[^"\n]*"[ \t]*$', re.MULTILINE)
BASEURL = re.compile(r'^(?P<indent>[ \t]+)baseurl: "[^"\n]*"[ \t]*$', re.MULTILINE)


def configure(text: str, repository_url: str, base_url: str, source_ref: str = MAIN) -> str:
    """``text`` (a _config.yml) with the repository's URL, the site's base URL for this version (a tag's site is
    under ``<base>/<tag>/``) and the ref launched notebooks install from; SiteError when a line is missing."""
    check_version(source_ref)
    for name, value in (("--repository-url", repository_url), ("--base-url", base_url)):
        if not re.fullmatch(r"https?://[^\s\"'\\]+", value):
            raise SiteError(f"{name} {value!r}: give an http(s) URL, e.g. https://github.com/ORG/REPO")
    base = base_url.rstrip("/") + "/" + ("" if source_ref == MAIN else f"{source_ref}/")
    for name, pattern in (("course_repository_url", REPOSITORY), ("baseurl", BASEURL)):
        count = len(pattern.findall(text))
        if count != 1:
            raise SiteError(f"_config.yml: expected one line `{name}: \"...\"`, found {count}: "
                            "the publishing workflow cannot set it (course_admin/publish/bookconfig.py)")

    def repository_lines(match: re.Match) -> str:
        indent = match.group("indent")
        return (f"{indent}course_repository_url: {json.dumps(repository_url.rstrip('/'))}\n"
                f"{indent}course_source_branch: {json.dumps(source_ref)}")

    text = REPOSITORY.sub(repository_lines, text)
    return BASEURL.sub(lambda m: f"{m.group('indent')}baseurl: {json.dumps(base)}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.publish.bookconfig", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("_config.yml"), help="the book's _config.yml, changed")
    parser.add_argument("--repository-url", required=True, help="e.g. https://github.com/ORG/REPO")
    parser.add_argument("--base-url", required=True, help="the Pages site's base URL, e.g. https://org.github.io/repo")
    parser.add_argument("--source-ref", default=MAIN, help="main, or the tag being published")
    args = parser.parse_args(argv)
    try:
        args.config.write_text(configure(args.config.read_text(encoding="utf-8"), args.repository_url,
                                         args.base_url, args.source_ref), encoding="utf-8")
    except SiteError as error:
        print(f"publish: {error}", file=sys.stderr)
        return 2
    print(f"publish: {args.config} set for {args.repository_url} (base URL {args.base_url}, ref {args.source_ref})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
