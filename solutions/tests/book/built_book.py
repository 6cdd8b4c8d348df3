"""Where the built book is, and the browser tests' rule for what they lack: the built book is $COURSE_BOOK_HTML,
else _build/html; a test that lacks it (or Chromium, playwright, axe-core) is skipped and says why, unless
$COURSE_REQUIRE_BOOK is set, as .ci/run sets it after `make book`: then it fails."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

REQUIRED = bool(os.environ.get("COURSE_REQUIRE_BOOK"))
BOOK = Path(os.environ.get("COURSE_BOOK_HTML") or REPO_ROOT / "_build" / "html")


def need(condition: bool, why: str) -> None:
    """Skip (or, with $COURSE_REQUIRE_BOOK, fail) the test unless ``condition`` holds."""
    if not condition:
        if REQUIRED:
            pytest.fail(f"{why} ($COURSE_REQUIRE_BOOK is set)")
        pytest.skip(why)


def need_browser() -> None:
    """Debian's Chromium and playwright are there."""
    from course_admin.book import browser_check

    need(browser_check.chromium() is not None, "no Chromium (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        need(False, "no playwright (pip install -e '.[dev]')")
