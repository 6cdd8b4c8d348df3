"""A run's cases, chapter by chapter: which global result indices belong to which chapter and phase.

One run of the grading child holds the cases of several chapters, numbered globally in the order they run;
a ``Segment`` is one chapter's share of them (sandboxed.py runs them, watch.py times them).
"""
from __future__ import annotations

import dataclasses

from .plan import Chapter, GradedCase


@dataclasses.dataclass(frozen=True)
class Segment:
    """One chapter's cases in a run: global result indices ``first`` .. ``end - 1``; ``base`` is the global
    index of the chapter's case 0 (a phase runs the public or the hidden cases of a chapter, ``phase``)."""
    chapter: Chapter
    first: int
    end: int
    base: int

    @classmethod
    def whole(cls, chapter: Chapter, base: int) -> Segment:
        return cls(chapter, base, base + len(chapter.cases), base)

    def phase(self, hidden: bool) -> Segment:
        """The chapter's public cases (they come first) or its hidden ones, as a segment of their own."""
        public = sum(1 for g in self.chapter.cases if not g.hidden)
        first, end = (self.base + public, self.end) if hidden else (self.base, self.base + public)
        return Segment(self.chapter, first, end, self.base)

    def graded(self) -> list[GradedCase]:
        return [g for g in self.chapter.cases if self.first <= self.base + g.index < self.end]
