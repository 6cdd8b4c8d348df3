"""The English-sentence detector of the Chinese learner's texts (issue 42), shared by the tests that read them:
grading/test_no_english_zh.py (the grader's and `course check`'s words) and release/test_learner_tree_zh.py and
release/test_stubs_zh.py (a learner tree released with ``--lang zh_CN``, walked as a learner would).

``english_runs`` finds a run of three or more English words outside code (backticks, identifiers, paths) and
outside an exception's own text that a message quotes (PyTorch's words, not the course's). ``commands_out`` takes
the course's own command lines out of a text first (``course capstone finetune`` is code, three words of it), and
``prose_of`` keeps of a Python source the words a learner reads there: its docstrings (a doctest example's
comment, never its code or output), its comments and the messages it raises, the code they write among their words
(a shape, a call) cut out (``code_out``).
"""
from __future__ import annotations

import ast
import doctest
import io
import re
import tokenize
from collections.abc import Iterable

WORD = re.compile(r"^[(\[“\"'‘]*[A-Za-z]+[)\]”\"'’,.:;!?]*$")  # a word of letters alone: not code, not a number
# code spans, and an exception's own text quoted after its type ("RuntimeError: ...", "(BadZipFile: ...)")
QUOTED = re.compile(r"`[^`]*`|\b[A-Z]\w*?[a-z]\w*?[A-Z]\w*\s*[:：].*$", re.MULTILINE)
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # Chinese and full-width punctuation end a run
NAMES = ("The Annotated Transformer", "Attention Is All You Need")  # a proper name is no sentence
# code in a docstring: a group in brackets without Chinese, or in parentheses with no two words in a row (a shape
# "(batch, seq, d_model)", a call's arguments "(x, x, x)"; "(the features of one position)" stays prose)
BRACKETS = re.compile(r"\[[^\[\]\u4e00-\u9fff\n]*\]")
PARENS = re.compile(r"\((?![^()\n]*?\b[A-Za-z]+ [A-Za-z]+\b)[^()\u4e00-\u9fff\n]*\)")


def english_runs(text: str) -> list[str]:
    """The runs of 3+ English words in ``text``, code spans and quoted exceptions left out."""
    text = CJK.sub(" | ", QUOTED.sub(" | ", str(text)))  # "|" is no word: what was there ends a run
    for name in NAMES:
        text = text.replace(name, " | ")
    found, run = [], []
    for token in text.replace("\n", " | ").split() + [""]:  # a line's end ends a run (a usage line, then a name)
        if token and WORD.match(token):
            run.append(token)
            continue
        if len(run) >= 3:
            found.append(" ".join(run))
        run = []
    return found


def code_out(text: str) -> str:
    """``text`` with the code a docstring writes among its words cut out (``BRACKETS``, ``PARENS``; nested groups
    from the inside out)."""
    while True:
        cut = PARENS.sub(" | ", BRACKETS.sub(" | ", text))
        if cut == text:
            return text
        text = cut


def commands_out(text: str, commands: dict[str, Iterable[str]]) -> str:
    """``text`` with each command line of the course cut out: a program of ``commands`` ({"course capstone":
    its subcommands}), then one of its subcommands if one follows (``course capstone finetune``)."""
    for program, subcommands in commands.items():
        words = "|".join(re.escape(s) for s in sorted(subcommands, key=len, reverse=True))
        text = re.sub(rf"(?<![\w-]){re.escape(program)}(?: (?:{words})(?![\w-]))?", " | ", text)
    return text


def _example_comments(source: str) -> list[str]:
    """The comments of a doctest example's source (a statement cut short ends the search quietly)."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                found.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


def docstring_prose(doc: str) -> str:
    """A docstring's words: its prose, and of each doctest example only its comments (its code and output are
    code)."""
    parts = []
    for part in doctest.DocTestParser().parse(doc):
        parts += _example_comments(part.source) if isinstance(part, doctest.Example) else [part]
    return "\n".join(parts)


def prose_of(source: str) -> str:
    """What a learner reads in a Python source besides its code: every docstring (``docstring_prose``), every
    ``#`` comment, and every string literal of a ``raise`` (an f-string's fields cut out)."""
    tree = ast.parse(source)
    texts = [docstring_prose(doc) for node in ast.walk(tree)
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
             and (doc := ast.get_docstring(node, clean=True)) is not None]
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            texts += [n.value for n in ast.walk(node.exc) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    texts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return code_out("\n".join(texts))
