"""The Chinese edition's translation catalogs: one gettext ``.po`` file per page, checked against the English.

Sphinx extracts every paragraph, heading, table cell and caption of a page (the Markdown that executed cells
display included) as a message (``make book`` runs the gettext builder into ``_build/gettext``); the
catalog of ``book/NN_name.md`` is ``book/locale/zh_CN/LC_MESSAGES/book/NN_name.po``, whose ``msgid`` is the
English it was translated from. The edition is in sync when every message of the current English has a
translation that is not fuzzy; ``problems`` lists each one that has not, and each translation that lost a
piece of markup (inline code, a role such as ``{glue:text}`x```, maths, a link target) or breaks the
typography of Chinese technical books (full-width punctuation beside Chinese, a space between Chinese and
Latin letters, digits or code).

Messages with no words to translate (a number, an identifier such as ``finetune-quick-bigrams``, a path, an
acronym) need none: Sphinx shows the English, which is the same in both editions.

The pages listed in ``book/locale/zh_CN/TRANSLATED`` are held to all of this; a page not yet listed is shown
in English in the Chinese edition, under a line that says so (language.py), until its catalog is complete.

    python -m course_admin.book.catalogs todo book/08_capstone [--part 1/2]   # JSON: messages to translate
    python -m course_admin.book.catalogs lint book/08_capstone done.json      # what is wrong with a translation
    python -m course_admin.book.catalogs apply book/08_capstone done.json     # {msgid: translation} into the .po
    python -m course_admin.book.catalogs check [book/08_capstone ...]         # what is missing or wrong
    python -m course_admin.book.catalogs terms                                # the term list, every catalog
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path

from course_lib.provided.layout import LAYOUT

from . import terms as term_list

LANGUAGE = "zh_CN"
LOCALE = LAYOUT.root / "book" / "locale"
CATALOGS = LOCALE / LANGUAGE / "LC_MESSAGES"
EXTRACTED = Path(os.environ.get("COURSE_GETTEXT") or LAYOUT.root / "_build" / "gettext")  # the English messages
# Pieces a translation keeps as they are: inline code, a role or its target, display and inline maths, a
# link's target, a footnote reference, an HTML tag, a substitution.
PROTECTED = re.compile(r"\{[\w:-]+\}`[^`]*`|``[^`]+``|`[^`]+`|\$\$.+?\$\$|\$[^$\n]+\$|\]\([^)\s]*\)|\[\^[\w-]+\]"
                       r"|</?[a-zA-Z][^>]*>|\{\{[^}]*\}\}")
CJK = r"[\u3400-\u4dbf\u4e00-\u9fff]"
HALF_AFTER_CJK = re.compile(CJK + r"[,.:;?!()]")
HALF_BEFORE_CJK = re.compile(r"[,:;?!(]" + CJK)
NO_SPACE = re.compile(CJK + r"[A-Za-z0-9`$\u00b1]|[A-Za-z0-9`$%]" + CJK)
# function notation keeps its half-width parentheses round Chinese words: P(正面), PE(位置，列)
FUNCTION = re.compile(r"(?<=[A-Za-z])\([^()（）\s]{1,16}\)")


def page_of(path: str | Path) -> str:
    """``book/08_capstone`` from a page's name, its .md path, its catalog or its template."""
    text = Path(path).as_posix()
    text = re.sub(r"\.(md|po|pot)$", "", text)
    return "book/" + text.rsplit("book/", 1)[-1] if "book/" in text else "book/" + text


def catalog(page: str) -> Path:
    return CATALOGS / f"{page_of(page)}.po"


def template(page: str, extracted: Path = EXTRACTED) -> Path:
    return extracted / f"{page_of(page)}.pot"


def read(path: Path):  # noqa: ANN201 - babel's Catalog
    from babel.messages.pofile import read_po
    with open(path, "rb") as fh:
        return read_po(fh, locale=LANGUAGE)


def needs_translation(msgid: str) -> bool:
    """Whether a message has words to translate: after its protected pieces, a word of two letters or more,
    in a message that is more than one identifier-like token (``finetune-scratch``, ``LSTM``, ``runs/x``)."""
    text = PROTECTED.sub(" ", msgid).strip()
    if not re.search(r"[A-Za-z]{2,}", text):
        return False
    token = re.fullmatch(r"[\w./:+-]+", text)
    return not (token and (re.search(r"[-_./:0-9]", text) or text.isupper()))


def protected(text: str) -> Counter[str]:
    """The protected pieces of ``text``; a role with its own link text (``{doc}`Chapter 6 <06_x>```) counts as its
    name and target only, since its text is to be translated."""
    def piece(found: str) -> str:
        labelled = re.fullmatch(r"(\{[\w:-]+\})`[^`<]*<([^>`]+)>`", found)
        return f"{labelled[1]}`<{labelled[2]}>`" if labelled else found
    return Counter(piece(p) for p in PROTECTED.findall(text))


def markup_lost(msgid: str, msgstr: str) -> list[str]:
    """The protected pieces of ``msgid`` that ``msgstr`` does not keep (each as often as in the English)."""
    missing = protected(msgid) - protected(msgstr)
    return sorted(missing)


LIST_START = re.compile(r"^(\d+)\. ")  # "8. Capstone": a chapter's title, which re-parsed alone would be a list


def as_title(msgid: str, msgstr: str) -> str:
    """The translation with a leading "N. " escaped ("N\\. ") when the English starts so: Sphinx parses each
    translation on its own, and "1. 为什么" alone is an ordered list, which a title cannot hold."""
    return LIST_START.sub(r"\1\\. ", msgstr) if LIST_START.match(msgid) else msgstr


def typography(msgstr: str) -> list[str]:
    """Where a translation breaks the typography: half-width punctuation beside Chinese, Chinese touching
    Latin letters, digits, code or maths without a space (inside protected pieces nothing is checked)."""
    text = PROTECTED.sub(lambda m: "`x`" if m.group(0)[0] in "`{$" else " ", msgstr)
    text = FUNCTION.sub("x", text)
    found = []
    for pattern, what in ((HALF_AFTER_CJK, "half-width punctuation after Chinese"),
                          (HALF_BEFORE_CJK, "half-width punctuation before Chinese"),
                          (NO_SPACE, "no space between Chinese and Latin text, digits or code")):
        found += [f"{what}: {m.group(0)!r}" for m in pattern.finditer(text)]
    return found + unclosed_emphasis(text)


def _punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def unclosed_emphasis(text: str) -> list[str]:
    """A closing ``**`` after punctuation and before a letter, as in ``**参考答案。**普通``: CommonMark does not
    close it (the run is not right-flanking), so the bold runs on. Move the punctuation out: ``**参考答案**。``."""
    found = []
    for line in text.splitlines():
        for i, m in enumerate(re.finditer(r"(?<!\*)\*\*(?!\*)", line)):  # a lone * is too often not emphasis
            before, after = line[m.start() - 1: m.start()], line[m.end(): m.end() + 1]
            if i % 2 and before and _punct(before) and after and not (after.isspace() or _punct(after)):
                found.append(f"bold not closed (punctuation before the closing **, a letter after: write the "
                             f"punctuation after the **): {line[max(0, m.start() - 12): m.end() + 4]!r}")
    return found


GLOSSARY = LAYOUT.root / "book" / "appendix_glossary.md"
SINGLE_WORDS = {"encoder", "decoder", "perplexity"}  # one-word terms with one meaning in this book
DISPLAY_MATHS = re.compile(r"\s*\\begin\{")  # a $$ block's message is its LaTeX alone


def _variants(cell: str, chinese: bool) -> list[list[str]]:
    """A glossary cell's terms (split at " / "), each with its accepted forms: ``a（b）`` gives a or b."""
    out = []
    for term in cell.split(" / "):
        term = re.sub(r"^[（(].*?[）)]", "", term.strip())  # "（逐位置）前馈网络": the optional prefix
        if chinese:
            main, _, alt = term.partition("（")
            out.append([f for f in (main.strip(), alt.rstrip("）").strip()) if f])
        else:
            out.append([re.sub(r"\s*\(.*?\)", "", term).strip()])
    return out


def glossary(path: Path = GLOSSARY) -> list[tuple[str, list[str]]]:
    """(English term, its accepted Chinese forms) of the glossary's table, for the terms a translation must
    render as the glossary does: those of two words or more, hyphenated ones, and ``SINGLE_WORDS``."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("English", "---") or set(cells[0]) <= set("-"):
            continue
        english, chinese = _variants(cells[0], False), _variants(cells[1], True)
        if len(english) == len(chinese):
            for [term], forms in zip(english, chinese):
                if " " in term or "-" in term or term.lower() in SINGLE_WORDS:
                    pairs.append((term, forms + [term] * (term != term.lower())))  # Post-LN may stay Post-LN
    return pairs


def terms(msgid: str, msgstr: str, page: str = "", pairs: list[tuple[str, list[str]]] | None = None,
          with_list: bool = False) -> list[str]:
    """The glossary terms ``msgid`` uses (outside code and maths) that ``msgstr`` renders otherwise (none on
    the glossary's own page, whose English column stays English); with ``term_list``, the breaches of the
    course's term list too (terms.py)."""
    if DISPLAY_MATHS.match(msgid):  # a displayed equation: its \\text{...} words are maths, kept as they are
        return []
    english = PROTECTED.sub(" ", msgid)
    found = term_list.violations(english, PROTECTED.sub(" ", msgstr)) if with_list else []
    if page and page_of(page) == page_of(GLOSSARY):
        return found
    for term, forms in glossary() if pairs is None else pairs:
        # a one-word term is matched in lower case only: capitalised, "Encoder" and "Decoder" are class names here
        flags = 0 if " " not in term and "-" not in term else re.IGNORECASE
        if re.search(r"(?<![\w-])" + re.escape(term) + r"s?(?![\w-])", english, flags) and \
                not any(form in msgstr for form in forms):
            found.append(f"glossary: {term!r} is {' or '.join(forms)}")
    return found


def problems(page: str, extracted: Path = EXTRACTED) -> list[str]:
    """Everything that keeps ``page``'s translation from being in sync with the current English."""
    pot = template(page, extracted)
    if not pot.is_file():
        return [f"{page}: no extracted English ({pot}); run `make book` first"]
    po = catalog(page)
    if not po.is_file():
        return [f"{page}: no catalog {LAYOUT.rel(po)}"]
    have = {m.id: m for m in read(po) if m.id}
    found = []
    for message in read(pot):
        if not message.id or not needs_translation(str(message.id)):
            continue
        english = str(message.id)
        line = f"{page}:{message.locations[0][1] if message.locations else '?'}"
        got = have.get(english)
        if got is None or not got.string:
            found.append(f"{line}: untranslated: {english[:70]!r}")
        elif got.fuzzy:
            found.append(f"{line}: fuzzy (the English changed since it was translated): {english[:70]!r}")
        else:
            found += [f"{line}: the translation lost {piece!r}" for piece in markup_lost(english, str(got.string))]
            if as_title(english, str(got.string)) != str(got.string):
                found.append(f"{line}: a leading number reads as a list: write it as {as_title(english, str(got.string))[:12]!r}")
            found += [f"{line}: {issue}" for issue in typography(str(got.string))
                      + terms(english, str(got.string), page, with_list=not term_list.pending(page))]
    return found


TRANSLATED = LOCALE / LANGUAGE / "TRANSLATED"  # the pages whose translation is complete, one a line


def translated(path: Path = TRANSLATED) -> list[str]:
    """The pages the Chinese edition has translated (the others it shows in English, saying so)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [page_of(line.strip()) for line in lines if line.strip() and not line.startswith("#")]


def pages(extracted: Path = EXTRACTED) -> list[str]:
    """The pages the English has messages for (every page of the book)."""
    return sorted(page_of(p.relative_to(extracted)) for p in extracted.rglob("*.pot"))


def todo(page: str, part: str = "1/1", extracted: Path = EXTRACTED) -> list[str]:
    """The messages of ``page`` still to translate (missing, empty or fuzzy), in page order; ``part`` k/n:
    the k-th of n nearly equal slices, so that two translators can share a page."""
    po = catalog(page)
    have = {m.id: m for m in read(po) if m.id} if po.is_file() else {}
    left = [str(m.id) for m in read(template(page, extracted)) if m.id and needs_translation(str(m.id))
            and not (m.id in have and have[m.id].string and not have[m.id].fuzzy)]
    k, n = (int(x) for x in part.split("/"))
    size = -(-len(left) // n)
    return left[(k - 1) * size: k * size]


def apply(page: str, translations: dict[str, str], extracted: Path = EXTRACTED) -> list[str]:
    """Write ``translations`` ({English: Chinese}) into the page's catalog, made from the current English
    (new messages added, those the English no longer has kept as obsolete); returns the problems left."""
    from babel.messages.pofile import write_po
    pot = read(template(page, extracted))
    po = catalog(page)
    current = read(po) if po.is_file() else pot
    if po.is_file():
        dropped = [m.id for m in current if m.id and m.string and m.id not in pot]
        if len(dropped) > 3:  # replaced paragraphs are a few; an extraction without execution drops every output
            print(f"catalogs apply: {len(dropped)} translated messages of {page} are not in {extracted} and become "
                  f"obsolete (e.g. {str(dropped[0])[:50]!r}): was it extracted with execution on (make book)?",
                  file=sys.stderr)
        current.update(pot, update_header_comment=False)
    for english, chinese in translations.items():
        if english in current and chinese.strip():
            current[english].string = as_title(english, chinese)
            current[english].flags.discard("fuzzy")
    po.parent.mkdir(parents=True, exist_ok=True)
    with open(po, "wb") as fh:
        write_po(fh, current, width=0, omit_header=False)
    return problems(page, extracted)


def lint(page: str, translations: dict[str, str], part: str = "1/1", extracted: Path = EXTRACTED) -> list[str]:
    """What is wrong with ``translations`` of ``page`` (its ``part``) before they are applied: messages left
    out, keys that are not messages of the page, lost markup, typography. Writes nothing."""
    wanted = todo(page, part, extracted)
    found = [f"left out: {m[:70]!r}" for m in wanted if not translations.get(m, "").strip()]
    known = {str(m.id) for m in read(template(page, extracted)) if m.id}
    found += [f"not a message of {page} (changed English?): {m[:70]!r}" for m in translations if m not in known]
    for english, chinese in translations.items():
        found += [f"{english[:40]!r}: lost {piece!r}" for piece in markup_lost(english, chinese)]
        found += [f"{english[:40]!r}: {issue}"
                  for issue in typography(chinese) + terms(english, chinese, page, with_list=True)]
    return found


def term_breaches(skip: list[str]) -> list[str]:
    """Every breach of the course's term list (terms.py): the message, notebook, code and figure catalogs (but
    ``skip``, repository paths) and the pages' catalogs, read as they are."""
    paths = [p for p in term_list.catalogs_to_check() if LAYOUT.rel(p) not in skip]
    return term_list.scan(paths) + [
        f"{LAYOUT.rel(po)}: {str(m.id)[:40]!r}: {issue}" for po in sorted((CATALOGS / "book").glob("*.po"))
        for m in read(po) if m.id and m.string
        for issue in term_list.violations(PROTECTED.sub(" ", str(m.id)), PROTECTED.sub(" ", str(m.string)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.book.catalogs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("todo")
    one.add_argument("page")
    one.add_argument("--part", default="1/1")
    two = sub.add_parser("apply")
    two.add_argument("page")
    two.add_argument("json")
    three = sub.add_parser("check")
    three.add_argument("pages", nargs="*")
    four = sub.add_parser("lint")
    four.add_argument("page")
    four.add_argument("json")
    four.add_argument("--part", default="1/1")
    five = sub.add_parser("terms", help="the course's term list in every catalog (terms.py)")
    five.add_argument("--skip", action="append", default=[], help="a catalog to leave out (repository path)")
    args = parser.parse_args(argv)
    if args.command == "terms":
        found = term_breaches(args.skip)
        print("\n".join(found) or "the term list holds in every catalog")
        return 1 if found else 0
    if args.command == "todo":
        print(json.dumps(todo(args.page, args.part), ensure_ascii=False, indent=1))
        return 0
    if args.command == "lint":
        left = lint(args.page, json.loads(Path(args.json).read_text(encoding="utf-8")), args.part)
    elif args.command == "apply":
        left = apply(args.page, json.loads(Path(args.json).read_text(encoding="utf-8")))
    else:
        left = [p for page in (args.pages or pages()) for p in problems(page)]
    print("\n".join(left) or "in sync: every message translated, markup and typography clean")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
