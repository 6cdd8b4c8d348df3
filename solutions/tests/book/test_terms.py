"""The course's Chinese term list (terms.py), enforced in every catalog of Chinese the course ships.

Each rule is shown to catch its planted breach and to pass the chosen rendering; a planted breach in a page's
catalog fails that page's check (catalogs.problems, which `make book` runs), in a figure's or a printed line's
catalog fails theirs, and one in a notebook's or the message catalog fails the scan below. The real catalogs are
then held to the list, except those in ``terms.PENDING`` (each skipped with its reason, and only while it still
has a breach: an entry whose catalog became clean fails, so that it is removed).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from course_admin.book import catalogs, figures, outputs, terms
from course_lib.provided.layout import LAYOUT


@pytest.mark.parametrize("english, wrong, right", [
    ("True = may attend", "True = 可以注意", "True 表示可以关注"),
    ("real tokens attend to the padding", "真实词元会注意到填充", "真实词元会关注到填充"),
    ("3 points", "3 个分数", "3 个得分"),
    ("no points for the check *built from scratch*", "在*从零构建*这项检查上拿不到分", "在*从零实现*这项检查上拿不到分"),
    ("the generator is tied to the target embedding", "生成器与目标嵌入共享权重", "生成器与目标嵌入做了权重绑定"),
    ("a beam keeps k hypotheses", "束中保留 k 个假设", "束中保留 k 个候选序列"),
    ("one standard error", "一个标准误差", "一个标准误"),
    ("as seed 000 does", "如种子文章 000 所做", "如参考原文 000 所做"),
    ("the stub", "代码桩", "桩代码"),
    ("bigram inputs", "二元组输入", "二元语法输入"),
    ("your notebook", "你的练习册", "你的笔记本"),
    ("two CPU cores", "两个 CPU 核", "两个 CPU 核心"),
    ("your instructor", "你的教师", "老师"),
    ("the schedule", "调度", "学习率调度"),
])
def test_each_rule_catches_its_breach_and_passes_the_chosen_term(english: str, wrong: str, right: str) -> None:
    assert terms.violations(english, wrong), wrong
    assert terms.violations(english, right) == [], right


@pytest.mark.parametrize("english, chinese", [
    ("Things to keep in mind: a mask is boolean", "需要注意的几点：掩码是布尔类型"),  # 注意 as "note", no attend
    ("the scores get 3 points of the grade", "分数"),                                  # scores: 分数 is theirs
    ("We hypothesized it would allow the model to attend by relative positions", "我们假设这能让模型按相对位置进行关注"),
    ("the attention scores", "注意力分数"),
])
def test_what_the_rules_leave_alone(english: str, chinese: str) -> None:
    assert terms.violations(english, chinese) == []


def _write_po(path: Path, entries: dict[str, str]) -> None:
    cat = Catalog(locale="zh_CN")
    for english, chinese in entries.items():
        cat.add(english, chinese)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        write_po(fh, cat)


def test_a_breach_in_a_page_fails_its_check_unless_the_page_is_pending(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(catalogs, "CATALOGS", tmp_path / "locale")
    monkeypatch.setitem(terms.PENDING, "book/locale/zh_CN/LC_MESSAGES/book/98_pending.po", "planted: its owner fixes it")
    english = "Masks are boolean, True = may attend."
    for page in ("book/99_planted", "book/98_pending"):
        _write_po(tmp_path / "gettext" / f"{page}.pot", {english: ""})
        _write_po(catalogs.catalog(page), {english: "掩码是布尔类型，True = 可以注意。"})
    [problem] = catalogs.problems("book/99_planted", tmp_path / "gettext")
    assert "term list: attend is 关注" in problem
    assert catalogs.problems("book/98_pending", tmp_path / "gettext") == []    # PENDING: its owner fixes it
    assert catalogs.lint("book/98_pending", {english: "掩码是布尔类型，True = 可以注意。"}, extracted=tmp_path / "gettext")


def test_a_breach_in_a_figure_or_a_printed_line_fails_their_check(monkeypatch) -> None:
    where = "book/locale/zh_CN/figures/99_planted.json"
    found = [issue for e, zh in {"key (attended to)": "键（被注意者）"}.items()
             for issue in catalogs.terms(e, zh, with_list=not terms.pending(where))]
    assert found and "attend is 关注" in found[0]
    assert figures.term_list is terms and outputs.term_list is terms   # both modules check with the list


def test_a_breach_in_a_notebook_or_the_message_catalog_is_found(tmp_path: Path) -> None:
    notebook = tmp_path / "ch99_planted.json"
    notebook.write_text(json.dumps({"task": {"en": "All boolean, **True = may attend**.",
                                             "zh_CN": "全部为布尔类型，**True = 可以注意**。"}}), encoding="utf-8")
    messages = tmp_path / "zh_CN.json"
    messages.write_text(json.dumps({"test accuracy {a} ± {se} (one standard error)": "测试准确率 {a} ± {se}（一个标准误差）"},
                                   ensure_ascii=False), encoding="utf-8")
    found = terms.scan([notebook, messages])
    assert len(found) == 2 and "attend is 关注" in found[0] and "standard error is 标准误" in found[1]


def _catalogs() -> list[str]:
    pages = sorted(LAYOUT.rel(p) for p in (catalogs.CATALOGS / "book").glob("*.po"))
    return pages + [LAYOUT.rel(p) for p in terms.catalogs_to_check()]


@pytest.mark.parametrize("path", _catalogs())
def test_every_catalog_keeps_the_term_list(path: str) -> None:
    full = LAYOUT.root / path
    if path.endswith(".po"):
        found = [f"{m.id!s:.40}: {issue}" for m in catalogs.read(full) if m.id and m.string
                 for issue in terms.violations(catalogs.PROTECTED.sub(" ", str(m.id)),
                                               catalogs.PROTECTED.sub(" ", str(m.string)))]
    else:
        found = terms.scan([full])
    if terms.pending(path):
        assert found, f"{path} keeps the term list now: remove it from terms.PENDING"
        pytest.skip(f"{terms.PENDING[path]} ({len(found)} breach(es) left)")
    assert found == []


def test_the_glossary_takes_its_optional_prefix_in_full_width_parentheses() -> None:
    pairs = dict(catalogs.glossary())
    assert pairs["position-wise feed-forward network"] == ["前馈网络"]
    assert pairs["weight tying"] == ["权重绑定"] and pairs["embedding sharing"] == ["嵌入共享"]
    chinese = [row.split("|")[2] for row in (LAYOUT.root / "book" / "appendix_glossary.md").read_text(
        encoding="utf-8").splitlines() if row.startswith("| ") and row.count("|") == 5]
    assert not any("(" in cell for cell in chinese)                     # the 中文 column's parentheses are full-width


def test_function_notation_keeps_its_half_width_parentheses() -> None:
    assert catalogs.typography("p(正确词元) = 0.9，P(正面) 的概率") == []
    assert catalogs.typography("这是(正面)的例子")                      # a parenthesis that is not a function's
