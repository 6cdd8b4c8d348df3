"""The learner's stubs in Chinese (course_admin/release/stub_i18n.py): made from the same solution modules as the
English stubs, with their docstrings, messages and comments translated and nothing else changed; the catalog
solutions/locale/zh_CN/course_lib.json in sync with the English; a learner tree released with ``--lang zh_CN``
holding them; a doctest's code and output byte for byte the English, its comments translated. Each test calls the
generator directly (no release, no install: under a second)."""
from __future__ import annotations

import ast
import doctest
import io
import json
import re
import shutil
import tokenize
import types
from pathlib import Path

import pytest
import torch

from course_admin.release import stub_i18n
from course_admin.release.learner_tree import export_learner_tree, translated_stubs
from course_admin.release.stubs import ReleaseError, make_stub
from course_lib.provided.layout import LAYOUT, Layout

from ..english import english_runs, prose_of

CJK = re.compile(r"[\u4e00-\u9fff]")
# An English heading ("Example:") or three English words in a row, outside code: "is never attended to".
ENGLISH = re.compile(r"^\s*[A-Z][a-z]+:|(?<![\w.])[A-Za-z][a-z]+ [a-z]{2,} [a-z]{2,}(?![\w(])")
MODULES = [p.name for p in LAYOUT.reference_modules()]


def without_strings(source: str) -> str:
    """The syntax tree of ``source`` with every string's words removed: a plain string becomes "", an f-string
    keeps only its fields (sorted: a translation may put them in another order)."""
    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            return ast.Constant("") if isinstance(node.value, str) else node

        def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
            fields = [self.visit(v) for v in node.values if isinstance(v, ast.FormattedValue)]
            return ast.JoinedStr(sorted(fields, key=ast.dump))
    return ast.dump(Blank().visit(ast.parse(source)))


def docstrings(source: str) -> list[str]:
    tree = ast.parse(source)
    return [doc for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and (doc := ast.get_docstring(node, clean=False)) is not None]


def examples(source: str) -> list[list[tuple[str, str]]]:
    """Each docstring's doctest examples, (code, output), a comment cut from the code (the stubs translate it; what
    stands before it stays byte for byte)."""
    def code(text: str) -> str:
        lines = text.split("\n")
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                lines[token.start[0] - 1] = lines[token.start[0] - 1][:token.start[1]]
        return "\n".join(lines)
    return [[(code(e.source), e.want) for e in doctest.DocTestParser().get_examples(d)] for d in docstrings(source)]


def load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)  # noqa: S102 - the stub the course generates
    return module


def test_every_text_of_the_stubs_is_translated_and_in_sync() -> None:
    left = stub_i18n.problems("zh_CN")
    assert not left, (f"{len(left)} problem(s) in {LAYOUT.rel(stub_i18n.catalog_path(LAYOUT, 'zh_CN'))}; `python -m "
                      "course_admin.release.stub_i18n todo zh_CN` lists what to translate:\n" + "\n".join(left[:20]))


@pytest.mark.parametrize("module", MODULES)
def test_the_chinese_stub_is_the_english_one_with_only_its_words_changed(module: str) -> None:
    english = make_stub(LAYOUT, LAYOUT.reference / module)
    chinese = make_stub(LAYOUT, LAYOUT.reference / module, "zh_CN")
    assert without_strings(chinese) == without_strings(english), "code, names or values differ"
    assert examples(chinese) == examples(english), "a doctest line or its output changed"
    assert not english_runs(prose_of(chinese)), english_runs(prose_of(chinese))  # a doctest's comments too
    for doc in docstrings(chinese):
        prose = [line for line in doc.splitlines() if not re.match(r"\s*(>>>|\.\.\.|tensor|torch\.)", line)]
        english = [line for line in prose if ENGLISH.search(line)]
        assert CJK.search(doc) and not english, english or doc[:200]
    comments = [line for line in chinese.splitlines() if line.lstrip().startswith("#")]
    assert comments and all(CJK.search(line) for line in comments), comments


def test_the_attention_stub_says_everything_in_chinese() -> None:
    stub = load(make_stub(LAYOUT, LAYOUT.reference / "attention.py", "zh_CN"), "zh_attention")
    assert "True 表示可以关注" in stub.__doc__ and "may attend" not in stub.__doc__
    doc = stub.scaled_dot_product_attention.__doc__
    for word in ("参数：", "返回：", "步骤：", "示例：", "(..., seq_q, seq_k)"):
        assert word in doc, word
    assert not re.search(r"\b(Args|Returns|Steps|Example)\b", doc)
    q = k = v = torch.randn(1, 2, 4)
    with pytest.raises(NotImplementedError) as caught:
        stub.scaled_dot_product_attention(q, k, v)
    assert str(caught.value) == ("第 02 章：请在 course_lib/attention.py 中实现 scaled_dot_product_attention"
                                 "（见本书第 02 章，exercises/ch02_attention）")
    with pytest.raises(TypeError, match=r"mask 必须是布尔张量（True 表示可以关注），却得到了 dtype torch.float32"):
        stub.scaled_dot_product_attention(q, k, v, mask=torch.ones(1, 2, 2))


def test_a_learner_tree_in_chinese_holds_the_chinese_stubs(tmp_path: Path) -> None:
    """The tree's files only (export_learner_tree, as `course release --learner-tree DIR --lang zh_CN` ends): no
    release, no install."""
    files = export_learner_tree(LAYOUT.root, tmp_path / "tree", None, "zh_CN")
    for module in MODULES:
        got = (tmp_path / "tree" / "course_lib" / module).read_text(encoding="utf-8")
        assert f"course_lib/{module}" in files and got == make_stub(LAYOUT, LAYOUT.reference / module, "zh_CN")
    package = (tmp_path / "tree" / "course_lib" / "__init__.py").read_text(encoding="utf-8")
    assert package.startswith('"""course_lib：') and "provided" in package
    assert without_strings(package) == without_strings((LAYOUT.course_lib / "__init__.py").read_text(encoding="utf-8"))
    english = export_learner_tree(LAYOUT.root, tmp_path / "en", None, "en")
    assert (tmp_path / "en" / "course_lib" / "attention.py").read_bytes() == \
        (LAYOUT.course_lib / "attention.py").read_bytes() and sorted(english) == sorted(files)


def test_submit_finds_the_unfinished_chinese_stubs(tmp_path: Path) -> None:
    from course_lib.provided import preflight
    export_learner_tree(LAYOUT.root, tmp_path / "tree", None, "zh_CN")
    assert preflight.unfinished_stubs("02", tmp_path / "tree") == ["course_lib/attention.py: scaled_dot_product_attention"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of what the Chinese stubs are made from, to edit: the solution modules, the catalog, the specs."""
    for folder in ("solutions/course_ref", "tests/specs"):
        shutil.copytree(LAYOUT.root / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in ("course_lib/__init__.py", LAYOUT.rel(stub_i18n.catalog_path(LAYOUT, "zh_CN"))):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(LAYOUT.root / rel, tmp_path / rel)
    return tmp_path


def test_a_planted_change_to_an_english_docstring_is_caught(root: Path) -> None:
    layout = Layout(root)
    assert stub_i18n.problems("zh_CN", layout) == [] and stub_i18n.warning("zh_CN", layout) is None, "in sync"
    old = "Attend from each query to all keys and mix the values with the resulting weights."
    new = "Attend from every query to all keys and mix the values with the resulting weights."
    solution = layout.reference / "attention.py"
    solution.write_text(solution.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    assert stub_i18n.problems("zh_CN", layout) == [f"untranslated: {new[:80]!r}",
                                                   f"stale (its English is gone): {old[:80]!r}"]
    with pytest.raises(ReleaseError, match=r"attention\.py: 1 text\(s\) of its stub have no zh_CN translation"):
        make_stub(layout, solution, "zh_CN")
    with pytest.raises(ReleaseError, match="no zh_CN translation"):
        translated_stubs(root, "zh_CN")  # so no Chinese learner tree is written with an English docstring
    assert make_stub(layout, solution)  # the English stub is unaffected
    said = stub_i18n.warning("zh_CN", layout)  # what `course release` warns of
    assert said and said.startswith("solutions/locale/zh_CN/course_lib.json is behind the English stubs (2 problem(s)")


def test_a_translation_that_loses_code_a_shape_or_a_number_is_named(root: Path) -> None:
    layout = Layout(root)
    path = stub_i18n.catalog_path(layout, "zh_CN")
    catalog = json.loads(path.read_text(encoding="utf-8"))
    key = next(k for k in catalog if k.startswith("Returns:\n    (batch, 1, 1, seq) bool"))
    catalog[key] = catalog[key].replace("(batch, 1, 1, seq)", "(batch, seq)").replace("``[b, 0, 0, j]``", "[b, 0, 0, j]")
    catalog[key] = catalog[key].replace("大小为 1 的", "大小为一的")
    path.write_text(json.dumps(catalog, ensure_ascii=False), encoding="utf-8")
    found = stub_i18n.problems("zh_CN", layout)
    assert any("markup lost: '``[b, 0, 0, j]``'" in p for p in found), found
    assert any("shape lost: '(batch, 1, 1, seq)'" in p for p in found), found
    assert any("number lost: '1'" in p for p in found), found  # "two axes of size 1" and the shape were its 1s
    assert stub_i18n.issues("axes of size 3", "大小为三的轴") == ["number lost: '3'"]
    assert stub_i18n.issues("a mask (batch, seq)", "掩码,形状为 (batch, seq)")[0] == \
        "half-width punctuation after Chinese: '码,'"
    assert stub_i18n.shapes("helpers (checks, data) of shape (d_model,) and (..., V)") == ["(d_model,)", "(..., V)"]


def test_a_doctest_comment_is_translated_and_a_planted_english_one_caught(root: Path) -> None:
    """The comment of a doctest line is a text of the catalog like any other: changed in English, it is untranslated
    (no Chinese stub is made); a translation left in English reaches the stub, and its prose check finds it."""
    layout, old = Layout(root), "two reviews, padded with 0"
    solution = layout.reference / "classifier.py"
    line = next(x for x in solution.read_text(encoding="utf-8").splitlines() if x.rstrip().endswith(f"# {old}"))
    assert line.lstrip().startswith(">>> ") and old in stub_i18n.wanted(layout)
    chinese = make_stub(layout, solution, "zh_CN")
    translated = stub_i18n.load_catalog(layout, "zh_CN")[old]
    assert line.replace(f"# {old}", f"# {translated}") in chinese.splitlines(), "code kept, comment translated"
    new = "two short reviews, padded with 0"
    solution.write_text(solution.read_text(encoding="utf-8").replace(f"# {old}", f"# {new}"), encoding="utf-8")
    assert stub_i18n.problems("zh_CN", layout) == [f"untranslated: {new!r}", f"stale (its English is gone): {old!r}"]
    with pytest.raises(ReleaseError, match=r"classifier\.py: 1 text\(s\) of its stub have no zh_CN translation"):
        make_stub(layout, solution, "zh_CN")
    path = stub_i18n.catalog_path(layout, "zh_CN")
    catalog = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**catalog, new: new}, ensure_ascii=False), encoding="utf-8")  # left in English
    runs = english_runs(prose_of(make_stub(layout, solution, "zh_CN")))
    assert len(runs) == 1 and runs[0] in new, runs  # "two short reviews, padded with": the "0" ends the run
