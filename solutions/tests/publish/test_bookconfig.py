"""The book's settings for the repository it is published from (course_admin/publish/bookconfig.py), written into
a copy of the real _config.yml: the launch buttons' repository, the base URL per version, the ref to install."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from course_admin.publish.bookconfig import configure, main
from course_admin.publish.site import SiteError
from course_lib.provided.layout import REPO_ROOT

CONFIG = (REPO_ROOT / "_config.yml").read_text(encoding="utf-8")
REPO, BASE = "https://github.com/org/transformers", "https://org.github.io/transformers"


def test_main_gets_the_repository_and_the_base_url_and_nothing_else_changes() -> None:
    before, after = yaml.safe_load(CONFIG), yaml.safe_load(configure(CONFIG, REPO + "/", BASE))
    assert after["sphinx"]["config"]["course_repository_url"] == REPO
    assert after["sphinx"]["config"]["course_source_branch"] == "main"
    assert after["html"]["baseurl"] == BASE + "/"
    for settings in (before, after):
        settings["sphinx"]["config"].pop("course_repository_url"), settings["html"].pop("baseurl")
    after["sphinx"]["config"].pop("course_source_branch")
    assert after == before


def test_a_tag_is_under_its_own_path_and_launches_install_the_tag() -> None:
    after = yaml.safe_load(configure(CONFIG, REPO, BASE + "/", "2027-spring"))
    assert after["html"]["baseurl"] == BASE + "/2027-spring/"
    assert after["sphinx"]["config"]["course_source_branch"] == "2027-spring"


@pytest.mark.parametrize("repo, base, ref, message", [
    (REPO, BASE, "term/2027", "no '/'"),
    ("org/transformers", BASE, "main", "give an http"),
    (REPO, 'https://x" injected', "main", "give an http"),
])
def test_bad_input_is_refused(repo: str, base: str, ref: str, message: str) -> None:
    with pytest.raises(SiteError, match=message):
        configure(CONFIG, repo, base, ref)


def test_a_config_without_the_lines_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = tmp_path / "_config.yml"
    config.write_text(CONFIG.replace('course_repository_url: ""', "course_repository_url: null"), encoding="utf-8")
    assert main(["--config", str(config), "--repository-url", REPO, "--base-url", BASE]) == 2
    assert "expected one line `course_repository_url" in capsys.readouterr().err


def test_jupyter_book_reads_them_as_the_build_will(tmp_path: Path) -> None:
    """The settings reach Sphinx as the build reads _config.yml (Jupyter Book's own conversion, build.py's call)."""
    from jupyter_book.config import get_final_config

    config = tmp_path / "_config.yml"
    config.write_text(configure(CONFIG, REPO, BASE, "2027-spring"), encoding="utf-8")
    final, *_ = get_final_config(user_yaml=config, sourcedir=REPO_ROOT,
                                 cli_config={"external_toc_path": str(REPO_ROOT / "_toc.yml"),
                                             "latex_individualpages": False})
    assert (final["html_baseurl"], final["course_repository_url"], final["course_source_branch"]) == (
        BASE + "/2027-spring/", REPO, "2027-spring")


def test_the_chinese_edition_is_based_under_zh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its canonical links name its own pages (<base>/zh/, a tag's <base>/<tag>/zh/); none for the offline book. The
    Chinese build is given that base URL (its Sphinx call seen, not run)."""
    from course_admin.book import editions

    config = tmp_path / "_config.yml"
    for text, expected in ((configure(CONFIG, REPO, BASE), BASE + "/zh/"),
                           (configure(CONFIG, REPO, BASE, "2027-spring"), BASE + "/2027-spring/zh/"), (CONFIG, "")):
        config.write_text(text, encoding="utf-8")
        assert editions.chinese_baseurl(config) == expected
    seen = {}
    monkeypatch.setattr(editions, "chinese_baseurl", lambda: BASE + "/zh/")
    monkeypatch.setattr(editions, "_sphinx", lambda builder, out, doctrees, overrides: seen.update(overrides) or 1)
    assert editions.build_chinese(tmp_path / "zh") == 1 and seen["html_baseurl"] == BASE + "/zh/"
    assert seen["language"] == "zh_CN"
