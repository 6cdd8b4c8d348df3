"""`make check`'s table aligns by terminal columns, not characters (issue 42, the typography low): a Chinese character
takes two columns, so a Chinese case name, status or message padded or wrapped by its length drifts the columns and
overruns the width."""
from __future__ import annotations

import unicodedata

import pytest

from course_lib.provided.check import table
from course_lib.provided.checking import Result

WIDTH = 80
LONG = ("Dropout 施加在了 softmax 之前的分数上：随后 softmax 又会把被置零的分数变回权重。应在 softmax 之后对权重施加 "
        "Dropout。（对注意力权重施加 Dropout 是 torch.nn.MultiheadAttention 和 The Annotated Transformer 的做法。）")


def columns(text: str) -> int:
    """Terminal columns of ``text``, computed here on its own (east_asian_width W and F take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def at(line: str, piece: str) -> int:
    """The terminal column where ``piece`` starts in ``line``."""
    return columns(line[:line.index(piece)])


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    results = [Result("02", "values, no mask", 1.0, 0.0, "fail", LONG, ["x"]),           # a Chinese name (catalog)
               Result("02", "padding mask (batch, 1, 1, seq_k)", 1.5, 1.5, "pass"),
               Result("02", "a case no catalog knows", 0.5, 0.0, "fail", "short English message"),
               Result("02", "built from scratch", 1.0, 0.0, "fail", "很长的中文说明，" * 12)]
    return table(results, width=WIDTH).splitlines()


def test_the_columns_align_with_chinese_rows(lines: list[str]) -> None:
    rows = [line for line in lines if " / " in line]
    assert len(rows) == 5, lines  # four checks and the total
    assert len({at(line, " / ") for line in rows}) == 1, "\n".join(rows)
    firsts = rows[:-1]
    assert len({at(line, "未通过") for line in firsts if "未通过" in line}) == 1, "\n".join(firsts)
    status_at = at(firsts[0], "未通过")
    assert {at(line, "通过") for line in firsts if "未通过" not in line} == {status_at}
    assert at(lines[0], "得分") < status_at and at(lines[0], "状态") == status_at, lines[0]


def test_a_wrapped_message_keeps_its_column_and_the_width(lines: list[str]) -> None:
    message_at = at(lines[2], "Dropout")
    continued = [line for line in lines[3:] if line.startswith(" ")]
    assert len(continued) >= 4, lines
    for line in continued:
        assert columns(line) - columns(line.lstrip()) == message_at, "\n".join(lines)
        assert not line.lstrip().startswith(("，", "。", "）", "：")), line
    assert max(columns(line) for line in lines) <= WIDTH, "\n".join(line for line in lines if columns(line) > WIDTH)


def test_every_check_failing_alike_is_one_line_within_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    stub = [Result("02", f"case {i}", 1.0, 0.0, "fail", "尚未实现：" + "请实现这个函数，" * 20) for i in range(3)]
    lines = table(stub, width=WIDTH).splitlines()
    assert len(lines) > 2 and all(line.startswith("    ") for line in lines[1:])
    assert max(columns(line) for line in lines) <= WIDTH, lines
