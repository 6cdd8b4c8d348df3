"""The command line in the learner's language: argparse's own words ("usage:", its groups' titles, -h, its error
line and commonest errors) through i18n, for `course check`, `course submit` and `course capstone`
(capstone/run.py uses Formatter and argparse_error). English help stays as argparse writes it."""
from __future__ import annotations

import argparse
import re
import sys

from .i18n import N_, _


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter with its "usage: " in the learner's language, and a section's colon full-width after
    a Chinese title."""

    def add_usage(self, usage, actions, groups, prefix=None):  # noqa: ANN001, ANN201 - argparse's signature
        super().add_usage(usage, actions, groups, _("usage: ") if prefix is None else prefix)

    def format_help(self) -> str:
        return re.sub(r"(?m)^(\S.*[\u3400-\u9fff]):$", "\\1：", super().format_help())


# argparse's own error messages (its wording in Python 3.10-3.13), read back into the catalog's templates
ARGPARSE_ERRORS = (
    (r"argument (?P<argument>\S+?): (?P<message>.+)", N_("argument {argument}: {message}")),
    (r"the following arguments are required: (?P<names>.+)", N_("the following arguments are required: {names}")),
    (r"invalid choice: (?P<value>.+?) \(choose from (?P<choices>.+)\)", N_("invalid choice: {value} (choose from "
                                                                          "{choices})")),
    (r"unrecognized arguments: (?P<names>.+)", N_("unrecognized arguments: {names}")),
    (r"expected one argument", N_("expected one argument")),
    (r"invalid (?P<type>\w+) value: (?P<value>.+)", N_("invalid {type} value: {value}")),
)


def argparse_error(message: str) -> str:
    """``message``, one of argparse's, in the learner's language where the catalog knows its template."""
    for pattern, template in ARGPARSE_ERRORS:
        found = re.fullmatch(pattern, message, re.DOTALL)
        if found:
            parts = found.groupdict()
            if "message" in parts:
                parts["message"] = argparse_error(parts["message"])
            return _(template).format(**parts)
    return message


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help and error line are in the learner's language: ``Parser(prog, description)``
    with a translated description, then ``localise`` once its arguments are added."""

    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, formatter_class=Formatter)

    def error(self, message: str):  # noqa: ANN201 - NoReturn, as argparse's
        self.print_usage(sys.stderr)
        self.exit(2, _("{prog}: error: {message}").format(prog=self.prog, message=argparse_error(message)) + "\n")

    def localise(self) -> Parser:
        """argparse's group titles and the text of -h in the learner's language (argparse makes them in English)."""
        self._positionals.title = _("positional arguments")  # noqa: SLF001 - argparse's groups, stable since 3.10
        self._optionals.title = _("options")  # noqa: SLF001
        for action in self._actions:  # noqa: SLF001
            if isinstance(action, argparse._HelpAction):  # noqa: SLF001
                action.help = _("show this help message and exit")
        return self
