"""Figures that draw Chinese: the course's CJK font for matplotlib.

matplotlib's default font, DejaVu Sans, has no Chinese characters: a Chinese label is drawn as empty boxes,
with a warning ``Glyph ... missing from font(s) DejaVu Sans``. The course ships a small font for the exercise
notebooks' figures, ``fonts/course-cjk.ttf`` beside this module: Noto Sans SC (SIL Open Font License 1.1, its
text in ``fonts/OFL.txt``), cut to the characters of the notebooks' labels and titles in every language they
are released in, and ASCII.

``use_cjk_font()`` registers it with matplotlib and adds its family to ``font.family`` *after* the families
already there: Latin text keeps its font, and only a character those fonts lack (a Chinese one) is drawn
with this one. The exercise notebooks call it in their figure cells, in every language, so the English and
the Chinese notebooks run the same code. Calling it again changes nothing.
"""
from __future__ import annotations

from pathlib import Path

FONT = Path(__file__).resolve().parent / "fonts" / "course-cjk.ttf"


def use_cjk_font() -> str:
    """Register the course's CJK font with matplotlib, last in ``font.family``; return its family name."""
    import matplotlib
    from matplotlib import font_manager

    manager = font_manager.fontManager
    if not any(Path(entry.fname) == FONT for entry in manager.ttflist):
        manager.addfont(str(FONT))
    family = next(entry.name for entry in manager.ttflist if Path(entry.fname) == FONT)
    current = matplotlib.rcParams["font.family"]
    current = [current] if isinstance(current, str) else list(current)
    if family not in current:
        matplotlib.rcParams["font.family"] = [*current, family]
    return family
