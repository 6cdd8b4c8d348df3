"""What a check is: a chapter's case, what it returned, and the failure a probe raises.

The data of the checks, apart from the code that runs and judges them (checking.py) and from the case
decided by reading the learner's source (ready_made.py): both import this module, never each other.
The specs import these names from checking.py, which re-exports them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from torch import Tensor

Outputs = dict[str, Tensor]
Probe = Callable[[Any, dict[str, Tensor]], Outputs]
Relation = Callable[[Outputs, dict[str, Tensor]], dict[str, str]]  # (outputs, inputs) -> {property: message}
SOURCE_PROBE = "(source scan)"  # the probe of a ready-made case: nothing runs, the learner's source is read


class CheckFailure(Exception):
    """Raised by a probe or a judge with a message for the learner: an English template and its fields,
    ``CheckFailure("the output has shape {got}", got=...)``. ``str()`` is the English (what a spec's ``RAISES``
    patterns match); ``shown()`` the message in the learner's language (i18n.py)."""

    def __init__(self, message: str = "", **fields: Any) -> None:
        self.template, self.fields = str(message), fields
        super().__init__(self.template.format(**fields) if fields else self.template)

    def shown(self) -> str:
        from .i18n import _
        return _(self.template).format(**self.fields) if self.fields else _(self.template)


@dataclass(frozen=True)
class Case:
    """One graded check of a chapter.

    make_inputs(seed) is deterministic; ``ignore(inputs)`` may give, per output key, a bool tensor of
    positions not graded (still required finite). ``hint`` follows a wrong value no known mistake explains,
    ``hint_if_raises`` an exception no ``RAISES`` pattern names; ``hint_on``, when given, limits ``hint`` to failures
    of those kinds (relation properties, output keys, or "values", "nonfinite", "shape", "dtype", "type", "missing"). ``ready_made``: only on a ready-made case.
    ``relation(outputs, inputs)``: {property: message} for each property between the outputs that fails
    ({} when all hold); the outputs named in ``free`` are judged by it alone (not compared with the reference).
    """

    name: str
    points: float
    probe: str
    make_inputs: Callable[[int], dict[str, Tensor]]
    seed: int = 0
    about: str = ""
    hint: str = ""
    hint_if_raises: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    ignore: Callable[[dict[str, Tensor]], dict[str, Tensor]] | None = None
    ready_made: tuple[tuple[str, tuple[str, ...]], ...] = ()
    relation: Relation | None = None
    free: tuple[str, ...] = ()
    hint_on: tuple[str, ...] = ()

    @property
    def reads_source(self) -> bool:
        """True for a ready-made case: judged by ``judge_source`` on the learner's source, not by a probe."""
        return self.probe == SOURCE_PROBE


@dataclass
class Result:
    chapter: str
    case: str
    points: float
    earned: float
    status: str  # "pass" | "fail"
    message: str = ""
    mistakes: list[str] = field(default_factory=list)
