"""A page's figure in both editions of the book from one execution (the book's own code, not the learner's).

A page executes once for both editions (one execution cache), so a figure's words must be drawn in each
language while the page runs: ``show(fig)`` draws the figure as SVG in English, puts each of its texts (titles,
axis labels, legends, annotations) in Chinese from the page's catalog, draws it again, and displays both in one
output: the English as ``image/svg+xml``, the Chinese as ``MIME["zh_CN"]``. Each edition's build picks its own
(solutions/course_admin/book/figures.py, the Sphinx side, which also fails the Chinese build on a text left
untranslated). The catalog is ``book/locale/zh_CN/figures/<page>.json``, ``{English: 中文}``, for the texts
and for the figures' alt text; the page's execution is tied to it (course_sources.py), so a new translation
redraws that page's figures. A text with no letter outside ``$...$`` (numbers, ticks, maths) is left as it is.

    show = Figures("02_attention").show
    fig, ax = plt.subplots(); ax.set_title("The variance grows"); show(fig)
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

LOCALE = Path(__file__).resolve().parents[1] / "locale"
MIME = {"zh_CN": "image/x.course-zh-cn+svg"}  # the Chinese drawing's type in the output's bundle
MATH = re.compile(r"(?<!\\)\$.*?(?<!\\)\$")
METADATA = "course_figure"  # the output's metadata: what the drawing said, and what is not translated
CJK_FAMILY = "Course CJK"  # the book's CJK font, registered in every page's kernel (course_admin/book/cjk_font.py)
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def catalog_path(page: str, lang: str = "zh_CN") -> Path:
    return LOCALE / lang / "figures" / f"{page}.json"


def wants_translation(text: str) -> bool:
    """Words to translate: a letter outside maths (``$d_k$`` alone, ``10^{2}`` or ``0.5`` are not)."""
    return any(ch.isalpha() for ch in MATH.sub("", text))


def mixed_with_maths(text: str) -> str | None:
    """A text with maths and Chinese, as matplotlib can draw it; None for any other text.

    Outside ``$...$``, matplotlib's maths layout draws a text with one font, the text's first (no fallback to
    the next family as plain text has): the Chinese around the maths gets the CJK font first (the others
    follow it, for what matplotlib measures in plain text, such as "lp"), and the spaces beside
    the maths, which that font lacks, move into the maths as ``\\ ``. Latin letters beside the maths would
    still be missing: matplotlib then warns on stderr, which fails the build (MyST-NB's stderr warning).
    """
    if not CJK.search(text) or not MATH.search(text):
        return None
    text = re.sub(r" +(?<!\\)\$(.*?)(?<!\\)\$", lambda m: "$\\ " + m[1] + "$", text)
    return re.sub(r"(?<!\\)\$(.*?)(?<!\\)\$ +", lambda m: "$" + m[1] + "\\ $", text)


def _svg(fig: Any) -> str:
    from IPython.core.pylabtools import print_figure
    data = print_figure(fig, "svg", bbox_inches="tight")  # what the inline backend draws
    return data.decode("utf-8") if isinstance(data, bytes) else data


class Figures:
    """The figures of one page (``page``: the file name of the page, e.g. ``02_attention``)."""

    def __init__(self, page: str) -> None:
        self.page = page

    def catalogs(self) -> dict[str, dict[str, str]]:
        out = {}
        for lang in MIME:
            path = catalog_path(self.page, lang)
            out[lang] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        return out

    def bundle(self, fig: Any) -> tuple[dict[str, str], dict[str, Any]]:
        """(the output's data: one drawing per edition, its metadata: the texts and the untranslated ones)."""
        from matplotlib.text import Text
        from matplotlib.ticker import FuncFormatter
        # drawn: the tick labels now hold their text; text/plain as the inline backend has it (builders
        # without images, such as Sphinx's gettext, take it)
        data, said = {"image/svg+xml": _svg(fig), "text/plain": repr(fig)}, {}
        # Tick labels are written again from their axis's formatter at each drawing: where one says words, the
        # formatter is wrapped to translate what it writes. Every other text keeps what set_text gives it.
        axes = [(axis, which) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for which in ("major", "minor")]
        tick_texts = {id(t) for axis, which in axes for t in axis.get_ticklabels(which=which)}
        worded = [(axis, which) for axis, which in axes
                  if any(wants_translation(t.get_text()) for t in axis.get_ticklabels(which=which))]
        texts = [t for t in fig.findobj(Text)
                 if id(t) not in tick_texts and t.get_visible() and wants_translation(t.get_text())]
        english = [t.get_text() for t in texts]
        words = set(english) | {t.get_text() for axis, which in worded for t in axis.get_ticklabels(which=which)
                                if wants_translation(t.get_text())}
        formatters = [(axis.get_major_formatter() if which == "major" else axis.get_minor_formatter())
                      for axis, which in worded]
        families = [list(t.get_fontfamily()) for t in texts]
        for lang, catalog in self.catalogs().items():
            for artist, text, family in zip(texts, english, families):
                said_as = catalog.get(text, text)
                drawable = mixed_with_maths(said_as)
                artist.set_text(drawable or said_as)
                if drawable:  # the CJK font first, for the maths layout; the others after, for plain text
                    artist.set_fontfamily([CJK_FAMILY] + [f for f in family if f != CJK_FAMILY])
            for (axis, which), original in zip(worded, formatters):
                said_as = FuncFormatter(lambda x, pos, f=original: catalog.get(f(x, pos), f(x, pos)))
                (axis.set_major_formatter if which == "major" else axis.set_minor_formatter)(said_as)
            data[MIME[lang]] = _svg(fig)
            said[lang] = {"texts": sorted(words), "untranslated": sorted(w for w in words if w not in catalog)}
        for artist, text, family in zip(texts, english, families):
            artist.set_text(text)
            artist.set_fontfamily(family)
        for (axis, which), original in zip(worded, formatters):
            (axis.set_major_formatter if which == "major" else axis.set_minor_formatter)(original)
        return data, {METADATA: {"page": self.page, **said}}

    def show(self, fig: Any = None) -> None:
        """Display ``fig`` (the current figure by default) in both editions' languages, then close it."""
        import matplotlib.pyplot as plt
        from IPython.display import display
        fig = plt.gcf() if fig is None else fig
        data, metadata = self.bundle(fig)
        plt.close(fig)
        display(data, raw=True, metadata=metadata)
