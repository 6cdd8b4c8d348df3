"""The course's Chinese term list, enforced: one rendering for each term a learner must recognise across texts.

The glossary (book/appendix_glossary.md) fixes how multi-word terms are translated (catalogs.py ``glossary``);
this module adds the decisions of the course's term list that a glossary row cannot express, each a rule on
one (English, Chinese) pair:

* conditional rules: where the English uses a term (``attend``, a grade's ``points``, a beam's
  ``hypothesis``, ``tie``), the Chinese must not use the rendering the list rejects (注意, 分数, 假设, 共享权重)
  and, for a check's name, must use the one it chose (``built from scratch`` is 从零实现);
* plain rules: renderings rejected wherever they occur (标准误差 for 标准误, 种子文章 for 参考原文, 代码桩 for
  桩代码, 练习册 for 笔记本, ``CPU 核`` for CPU 核心, 你的教师 for 老师, a bare 调度 for 学习率调度).

``catalogs.terms(..., with_list=True)`` applies these rules with the glossary's: the pages' catalogs
(catalogs.problems), their figures (figures.py) and printed lines (outputs.py) fail ``make book`` on a breach;
solutions/tests/book/test_terms.py holds every catalog to them, the notebooks' (solutions/locale/zh_CN/) and the
learners' message catalog (course_lib/provided/locale/zh_CN.json) included. A catalog in ``PENDING`` is
skipped there, with its reason, while its owner brings it in line. The catalogs command lists every breach:

    .venv/bin/python -m course_admin.book.catalogs terms [--skip course_lib/provided/locale/zh_CN.json]
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

from course_lib.provided.layout import LAYOUT

ROOT = LAYOUT.root


class Rule(NamedTuple):
    """``english``: the English that brings the rule into play (None: always); ``rejected``: what the Chinese
    must not contain then; ``required``: what it must contain then (None: nothing); ``advice``: the decision."""
    english: re.Pattern[str] | None
    rejected: re.Pattern[str] | None
    required: re.Pattern[str] | None
    advice: str


def _re(pattern: str | None, flags: int = 0) -> re.Pattern[str] | None:
    return re.compile(pattern, flags) if pattern else None


RULES: tuple[Rule, ...] = tuple(Rule(_re(e, re.IGNORECASE), _re(r), _re(q), a) for e, r, q, a in (
    # 需要注意 / 注意事项 are "note": the words a translation may still use beside an "attend"
    (r"\battend(s|ed|ing)?\b", r"(?<!需要)注意(?!力|事项)", None, "attend is 关注 (True 表示可以关注), never 注意"),
    # a grade's points ("3 points", the column "points"), in English that speaks of no scores (then 分数 is
    # theirs) and not of a figure's points ("points to", "points of")
    (r"^(?![\s\S]*\bscor(e|es|ed|ing)\b)[\s\S]*\bpoints\b(?! (to|at|of|on|in|where|that|towards?)\b)", r"分数", None,
     "points (a grade) are 得分; 分数 is for attention scores"),
    (r"\bbuilt from scratch\b", None, r"从零实现", "the check 'built from scratch' is 从零实现"),
    (r"\bti(e|es|ed|ing)\b|\btying\b", r"权重共享|共享权重", None,
     "tie (tie_embeddings) is 权重绑定, share (share_embeddings) 嵌入共享"),
    (r"^(?=[\s\S]*\bbeam)[\s\S]*\bhypothes(is|es)\b", r"假设", None, "a beam's hypothesis is 候选序列"),
    (None, r"标准误差", None, "standard error is 标准误"),
    (None, r"从零构建", None, "the check 'built from scratch' is 从零实现"),
    (None, r"种子文章|源文章|所源自的[^，。]{0,4}文章|\bseed 0\d\d\b", None,
     "the seed articles are 参考原文 (参考原文 000 / 002)"),
    (None, r"代码桩", None, "stub is 桩代码"),
    (None, r"二元组", None, "a bigram is a 二元语法 (n-grams: n 元语法, as d2l-zh)"),
    (None, r"练习册", None, "notebook is 笔记本"),
    (None, r"CPU 核(?!心)", None, "CPU core is CPU 核心"),
    (None, r"你的教师", None, "instructor is 老师"),
    (None, r"(?<!学习率)调度(?!器)", None, "(learning-rate) schedule is 学习率调度, never a bare 调度"),
))


# Catalogs whose owners are still bringing them to the term list: their breaches are listed (``main``) but do
# not fail the checks yet. Each entry names why; remove it once ``python -m course_admin.book.catalogs terms`` shows
# none for that catalog (a test fails on an entry that has become clean, so that none outlives its reason).
PENDING: dict[str, str] = {}


def pending(page_or_path: str | Path) -> bool:
    """Whether a catalog (a repository path, or a page such as ``book/08_capstone``) is in ``PENDING``."""
    text = Path(page_or_path).as_posix()
    if not text.endswith((".po", ".json")):
        text = f"book/locale/zh_CN/LC_MESSAGES/{text}.po"
    return text.removeprefix(ROOT.as_posix() + "/") in PENDING


def violations(english: str, chinese: str) -> list[str]:
    """The rules of the term list that ``chinese``, a translation of ``english``, breaks (each once)."""
    found = []
    for rule in RULES:
        if rule.english is not None and not rule.english.search(english):
            continue
        if rule.rejected is not None and (m := rule.rejected.search(chinese)):
            found.append(f"term list: {rule.advice} (found {m.group(0)!r})")
        elif rule.required is not None and not rule.required.search(chinese):
            found.append(f"term list: {rule.advice}")
    return found


def pairs(path: Path) -> list[tuple[str, str, str]]:
    """(where, English, Chinese) of one JSON catalog: a notebook's (``{id: {"en": .., "zh_CN": ..}}``), or a
    flat one (``{English: Chinese}``: the message catalog, a page's figures or printed outputs)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.append((f"{LAYOUT.rel(path)}:{key}", str(value.get("en", "")), str(value.get("zh_CN", ""))))
        elif isinstance(value, str):
            out.append((f"{LAYOUT.rel(path)}:{key[:40]!r}", key, value))
    return out


def catalogs_to_check() -> list[Path]:
    """Every JSON catalog of Chinese the course ships besides the pages' .po files (catalogs.py checks those)."""
    return sorted([*(ROOT / "solutions" / "locale" / "zh_CN").glob("*.json"),
                   *(ROOT / "book" / "locale" / "zh_CN" / "figures").glob("*.json"),
                   *(ROOT / "book" / "locale" / "zh_CN" / "outputs").glob("*.json"),
                   ROOT / "course_lib" / "provided" / "locale" / "zh_CN.json"])


def scan(paths: list[Path]) -> list[str]:
    """Every violation of the term list in ``paths``, one line each."""
    return [f"{where}: {issue}" for path in paths if path.is_file()
            for where, english, chinese in pairs(path) for issue in violations(english, chinese)]
