"""The exercise notebooks' figures draw Chinese (issue 42, M4): the learner's package ships a CJK font for
matplotlib (course_lib/provided/fonts/, made by code_i18n.write_font), it holds every character the translated
plot labels draw, the notebooks' figure cells register it (provided/plots.py) in both editions, and a figure
with the Chinese labels draws with warnings as errors through the helper, and warns "Glyph ... missing"
without it. A few seconds (no kernel, no nbgrader)."""
from __future__ import annotations

import ast
import fnmatch
import json
import re
import shutil
import warnings
from pathlib import Path

import matplotlib
import pytest

from course_admin.release import code_i18n, learner_tree, notebook_i18n
from course_lib.provided import plots
from course_lib.provided.layout import LAYOUT, Layout

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LANGS = list(notebook_i18n.EDITIONS)


def labels(lang: str) -> list[str]:
    """Every translated plot label and title of the exercise notebooks, as the figures draw them."""
    found = []
    for source in LAYOUT.exercise_sources():
        notebook = json.loads((source / f"{source.name}.ipynb").read_text(encoding="utf-8"))
        catalog = code_i18n.load(code_i18n.path(LAYOUT.solutions, lang, source.name))
        found += [catalog[en] for en in code_i18n.units(notebook, plot=True, prose=False) if catalog.get(en)]
    return found


def draw(*texts: str) -> None:
    """A figure with ``texts`` as its title and labels, drawn (Agg) and closed."""
    fig, ax = plt.subplots(figsize=(3, 2))
    try:
        ax.set_title(texts[0])
        for i, text in enumerate(texts[1:]):
            ax.text(0, i / max(len(texts), 1), text)
        fig.canvas.draw()
    finally:
        plt.close(fig)


def test_the_font_holds_every_character_of_the_translated_labels() -> None:
    assert code_i18n.PLOT_LABELS, "the Chinese notebooks' figures get their labels translated"
    lacking = code_i18n.font_lacks(LAYOUT, LANGS)
    assert not lacking, (f"{LAYOUT.rel(code_i18n.font_path(LAYOUT))} lacks {''.join(sorted(lacking))!r}: run "
                         "`cd solutions && ../.venv/bin/python -m course_admin.release.notebook_i18n font zh_CN`")
    assert code_i18n.font_path(LAYOUT) == plots.FONT and (plots.FONT.parent / "OFL.txt").is_file()
    assert "SIL Open Font License" in (plots.FONT.parent / "OFL.txt").read_text(encoding="utf-8")
    assert re.search(r"[\u4e00-\u9fff]", "".join(labels("zh_CN"))), "no Chinese label to hold"


def test_the_learner_gets_the_font() -> None:
    """The learner tree copies it (git's files outside the instructor's), and a wheel installs it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    shipped = set(learner_tree.learner_files(LAYOUT.root))
    assert {"course_lib/provided/fonts/course-cjk.ttf", "course_lib/provided/fonts/OFL.txt"} <= shipped
    for pyproject in (LAYOUT.root / "pyproject.toml", LAYOUT.solutions / "learner" / "pyproject.toml"):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]["course_lib"]
        for file in (plots.FONT, plots.FONT.parent / "OFL.txt"):
            relative = file.relative_to(LAYOUT.course_lib).as_posix()
            assert any(fnmatch.fnmatch(relative, pattern) for pattern in data), (pyproject, relative)


def test_a_label_with_a_character_the_font_lacks_fails(tmp_path: Path) -> None:
    """Planted: a translated label gains 龙 (the book's font has it, the shipped one not) and 龘 (neither has it):
    both are named; the tool then adds 龙 and says the book's font lacks 龘."""
    root = tmp_path / "repo"
    for folder in ("solutions/source", "solutions/locale"):
        shutil.copytree(LAYOUT.root / folder, root / folder)
    shutil.copytree(plots.FONT.parent, root / "course_lib" / "provided" / "fonts")
    layout = Layout(root)
    assert code_i18n.font_lacks(layout, LANGS) == set()
    catalog_file = code_i18n.path(layout.solutions, "zh_CN", "ch02_attention")
    catalog = code_i18n.load(catalog_file)
    catalog["query"] += "龙龘"
    catalog_file.write_text(json.dumps(catalog, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    assert code_i18n.font_lacks(layout, LANGS) == {"龙", "龘"}
    held, missing = code_i18n.write_font(layout, LANGS)
    assert missing == {"龘"} and code_i18n.font_lacks(layout, LANGS) == {"龘"}
    assert held == len(code_i18n.drawn(layout, LANGS)) - 1 and (root / "course_lib/provided/fonts/OFL.txt").is_file()


def test_a_chinese_figure_draws_through_the_helper_and_warns_without_it() -> None:
    texts = labels("zh_CN")
    with matplotlib.rc_context({"font.family": matplotlib.rcParamsDefault["font.family"]}):
        with warnings.catch_warnings():  # without the helper: DejaVu Sans, boxes and a warning
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="missing from font"):
                draw(*texts)
    with matplotlib.rc_context({"font.family": matplotlib.rcParamsDefault["font.family"]}):
        before = list(matplotlib.rcParams["font.family"])
        family = plots.use_cjk_font()
        assert plots.use_cjk_font() == family == code_i18n.FONT_FAMILY  # a second call changes nothing
        assert matplotlib.rcParams["font.family"] == [*before, family], "Latin text keeps its font: ours comes last"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            draw(*texts, "distance T - t: 0123456789")


def _calls(source: str) -> list[str]:
    return [n.func.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


@pytest.mark.parametrize("folder", ["exercises", *(f"exercises_{lang}" for lang in LANGS)])
def test_each_notebook_registers_the_font_before_its_first_figure(folder: str) -> None:
    """In every edition the same call: the first code cell that imports pyplot calls use_cjk_font()."""
    figures = 0
    for notebook in sorted((LAYOUT.root / folder).glob("ch[0-9][0-9]_*/*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                   for c in cells if c["cell_type"] == "code"]
        first = next((s for s in sources if "import matplotlib.pyplot as plt" in s), None)
        if first is not None:
            figures += 1
            assert "use_cjk_font" in _calls(first), f"{notebook.name}: its first figure cell does not call use_cjk_font()"
            assert "from course_lib.provided.plots import use_cjk_font" in first
    assert figures >= 7, f"{folder}: {figures} notebooks with a figure"
