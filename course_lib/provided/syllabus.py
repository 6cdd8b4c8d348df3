"""The course's chapters, written once: number, title, book page and what the learner implements.

Every other list of chapters (the tables in README.md and book/intro.md, the chapters part of
_toc.yml, the heading of each chapter's page) is checked against this one by
solutions/tests/test_syllabus.py, which says what to fix when they disagree.

    for chapter in SYLLABUS:
        chapter.number, chapter.title, chapter.page      # "02", "Attention", "02_attention"
        chapter.ready()                                  # True: tests/specs/ch02.py exists
    ready()                                              # the chapters with checks, in order

A chapter is *ready* exactly when it has checks (``tests/specs/chNN.py``); nothing here says so by
hand. A ready chapter's title must equal its spec's ``TITLE``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .layout import LAYOUT, Layout, chapter_number


@dataclass(frozen=True)
class Chapter:
    number: str       # "02": the index of every part of the chapter
    title: str        # the spec's TITLE once the chapter is ready; the heading of its page
    page: str         # the stem of the book page, book/<page>.md, e.g. "02_attention"
    implements: str   # what the learner implements, in short (Markdown; README.md's table)
    in_detail: str    # the same, in a sentence (Markdown; the table of book/intro.md)

    def ready(self, layout: Layout = LAYOUT) -> bool:
        """Whether the chapter has checks: its spec tests/specs/chNN.py exists."""
        return layout.spec(self.number).is_file()


SYLLABUS: tuple[Chapter, ...] = (
    Chapter("01", "Why not RNNs", "01_why_not_rnns",
            "an RNN step and loop, gradient norms",
            "a vanilla RNN step and loop; the gradient norm of the last state with respect to each input"),
    Chapter("02", "Attention", "02_attention",
            "`scaled_dot_product_attention`",
            "scaled dot-product attention with an optional mask, returning output and weights"),
    Chapter("03", "Multi-head attention", "03_multihead_attention",
            "split/merge heads, `MultiHeadAttention`",
            "splitting and merging heads; `MultiHeadAttention`"),
    Chapter("04", "Positional encoding", "04_positional_encoding",
            "sinusoidal table, `PositionalEncoding`, `TokenEmbedding`",
            "the sinusoidal table; `PositionalEncoding`; `TokenEmbedding` scaled by √d_model"),
    Chapter("05", "Encoder", "05_encoder",
            "`LayerNorm`, FFN, `EncoderLayer` (Post-LN and Pre-LN)",
            "`LayerNorm` from scratch, the position-wise feed-forward network, `EncoderLayer` "
            "(Post-LN and Pre-LN), the encoder stack"),
    Chapter("06", "Decoder and masks", "06_decoder_and_masks",
            "masks, `DecoderLayer`, `Transformer`",
            "padding, causal and target masks; `DecoderLayer` with cross-attention; the full "
            "encoder–decoder `Transformer`"),
    Chapter("07", "Training", "07_training",
            "label smoothing, warmup schedule, greedy decoding",
            "shifting the target right (teacher forcing), a label-smoothed loss that ignores padding, "
            "the warmup schedule, greedy decoding"),
    Chapter("08", "Capstone: sentiment classifier", "08_capstone",
            "masked mean pooling, `TransformerClassifier`",
            "masked mean pooling; `TransformerClassifier`, trained on real reviews"),
)


def chapter(number: str | int) -> Chapter:
    """The entry of chapter ``number`` ('ch02', '02', 2); KeyError names the chapters there are."""
    number = chapter_number(number)
    for entry in SYLLABUS:
        if entry.number == number:
            return entry
    raise KeyError(f"chapter {number!r} is not in the syllabus (course_lib/provided/syllabus.py); "
                   f"it has {', '.join(c.number for c in SYLLABUS)}")


def ready(layout: Layout = LAYOUT) -> list[Chapter]:
    """The chapters that have checks, in syllabus order."""
    return [entry for entry in SYLLABUS if entry.ready(layout)]
