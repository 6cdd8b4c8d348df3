"""What a page's code prints, in the Chinese edition (outputs.py).

The templates come from the page's print calls (its code, not one run's numbers); a printed line a template
writes is shown in Chinese with the values it printed; the check names a template left untranslated, a stale
translation, one whose values do not match and one that breaks the typography, so a print cannot change
without its translation. A planted page shows each.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_admin.book import catalogs, outputs

PAGE = "99_planted"
CODE = '''
import torch
gap, n, rows = 2.4e-07, 3, {"a": 1}
print(f"largest difference from PyTorch: {gap:.1e}")
print("sum of the weights:", round(1.0, 6))
print(f"{'beam size':>9}  {'seconds':>7}")
for name, cfg in [("this page's model", 1), ("the paper's base model", 2)]:
    mark = "ok" if cfg == 1 else f"WRONG (want {cfg})"
    print(f"{name}: {cfg:,} numbers per token, {mark}")
print(rows, f"total {n:,}")
print(f"{n:>4} {gap}")                         # no words, no text of its own: not a template
print("to stderr, not shown as output", file=__import__("sys").stderr)
%timeit print("a magic line is not Python")
'''


def page(root: Path, code: str = CODE) -> Path:
    path = root / "book" / f"{PAGE}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n  name: python3\n"
                    f"  display_name: Python 3\n---\n# Planted\n\n```{{code-cell}} ipython3\n{code}\n```\n\n"
                    "```{code-cell} ipython3\n:tags: [remove-cell]\n\nprint('a hidden cell is not a template')\n```\n",
                    encoding="utf-8")
    return root


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(catalogs, "LOCALE", tmp_path / "book" / "locale")
    return page(tmp_path)


def write(root: Path, catalog: dict[str, str]) -> None:
    path = outputs.catalog_path(PAGE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(catalog, ensure_ascii=False), encoding="utf-8")


def test_the_templates_are_read_from_the_pages_print_calls(root: Path) -> None:
    assert outputs.page_templates(PAGE, root) == [
        "largest difference from PyTorch: {}", "sum of the weights: {}", "beam size  seconds",
        "{}: {} numbers per token, {}", "{} total {}"]
    strings = outputs.page_strings(PAGE, root)
    assert {"this page's model", "the paper's base model", "ok", "WRONG (want {})"} <= set(strings)
    assert "{} {}" not in strings and "a hidden cell is not a template" not in strings


GOOD = {"largest difference from PyTorch: {}": "与 PyTorch 的最大差异：{}",
        "sum of the weights: {}": "权重之和：{}",
        "beam size  seconds": "     束宽       秒",
        "{}: {} numbers per token, {}": "{0}：每个词元 {1} 个数，{2}",
        "{} total {}": "{} 总计 {}",
        "this page's model": "本页的模型", "ok": "正确", "WRONG (want {})": "错误（应为 {}）"}


def test_a_printed_line_is_shown_with_its_translation_and_its_values(root: Path) -> None:
    lines = outputs.Lines(GOOD)
    printed = ("largest difference from PyTorch: 2.4e-07\nsum of the weights: 1.0\n"
               "this page's model: 1 numbers per token, ok\nthe paper's base model: 2 numbers per token, WRONG (want 2)\n"
               "tensor([0.401, 0.198])\nstep 200: valid_accuracy 0.773\n")
    said, left = lines.text(printed)
    assert said.split("\n") == [
        "与 PyTorch 的最大差异：2.4e-07", "权重之和：1.0",
        "本页的模型：每个词元 1 个数，正确",
        "the paper's base model：每个词元 2 个数，错误（应为 2）",   # a value the catalog lacks stays as printed
        "tensor([0.401, 0.198])", "step 200: valid_accuracy 0.773", ""]
    assert left == 1  # the library's log line: words, no template (editions.py reports such lines)


def test_an_untranslated_stale_or_broken_entry_is_named(root: Path) -> None:
    write(root, GOOD)
    assert outputs.problems(PAGE, root) == []
    broken = dict(GOOD, **{"sum of the weights: {}": "权重之和", "largest difference from PyTorch: {}": "",
                           "{} total {}": "{}总计{}", "an old line: {}": "旧的一行：{}"})
    write(root, broken)
    found = "\n".join(outputs.problems(PAGE, root))
    assert "printed line not translated: 'largest difference from PyTorch: {}'" in found
    assert "'sum of the weights: {}': the translation must hold the 1 value(s)" in found
    assert "'{} total {}': no space between Chinese and Latin text, digits or code" in found
    assert "stale, no print or string of the page writes 'an old line: {}'" in found


def test_a_planted_change_to_a_print_needs_its_translation(root: Path) -> None:
    """An English print changed without its translation: the new line is untranslated, the old one stale."""
    write(root, GOOD)
    page(root, CODE.replace("largest difference from PyTorch", "largest gap to PyTorch"))
    found = outputs.problems(PAGE, root)
    assert any("not translated: 'largest gap to PyTorch: {}'" in p for p in found)
    assert any("stale, no print or string of the page writes 'largest difference from PyTorch: {}'" in p for p in found)


def test_every_translated_page_prints_in_chinese() -> None:
    """The book's own catalogs: every worded line of every translated page's prints has its translation."""
    done = set(catalogs.translated())
    checked = [p for p in outputs.pages() if f"book/{p}" in done]
    assert len(checked) >= 9, checked
    assert [p for name in checked for p in outputs.problems(name)] == []
