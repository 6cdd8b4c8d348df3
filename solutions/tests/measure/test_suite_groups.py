"""Under `make test` (pytest-xdist, ``--dist loadgroup``) a file's tests run on one worker, so that its module
fixtures are paid once (suite_times.py puts each test's group in its id, which pytest-xdist 3.8 fails to do under
pytest 9); a file that names a group shares it with the other files of that group."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

MODULE = """import os
import pytest

@pytest.fixture(scope="module")
def paid(tmp_path_factory):
    with open(os.environ["PAID_LOG"], "a") as log:
        log.write("{name} " + os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")

@pytest.mark.parametrize("n", range(8))
def test_one(paid, n):
    pass
"""


def test_a_files_module_fixture_is_paid_once(tmp_path: Path) -> None:
    for name in ("alpha", "beta"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.replace("{name}", name), encoding="utf-8")
    (tmp_path / "test_gamma.py").write_text("import pytest\npytestmark = pytest.mark.xdist_group('shared')\n"
                                            + MODULE.replace("{name}", "gamma"), encoding="utf-8")
    (tmp_path / "test_delta.py").write_text("import pytest\npytestmark = pytest.mark.xdist_group('shared')\n"
                                            + MODULE.replace("{name}", "delta"), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    log = tmp_path / "paid.log"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "course_admin.measure.suite_times", "-n", "2",
                           "--dist", "loadgroup", "-p", "no:cacheprovider", "."], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PAID_LOG": str(log)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "32 passed" in done.stdout, done.stdout
    paid = log.read_text(encoding="utf-8").split("\n")[:-1]
    assert sorted(line.split()[0] for line in paid) == ["alpha", "beta", "delta", "gamma"], paid  # once a file
    workers = dict(line.split() for line in paid)
    assert workers["gamma"] == workers["delta"], paid  # a named group: one worker


def test_a_book_test_outside_the_book_folder_stops_the_run(tmp_path: Path) -> None:
    """`make test-book` collects solutions/tests/book alone, `make test` leaves the `book` mark out: a `book` test
    elsewhere would run in neither, so the collection that finds one fails, naming it; inside, it is collected."""
    book = tmp_path / "solutions" / "tests" / "book"
    book.mkdir(parents=True)
    marked = "import pytest\n\n@pytest.mark.book\ndef test_page():\n    pass\n"
    (book / "test_inside.py").write_text(marked, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    book: planted\n", encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "course_admin.measure.suite_times", "-p", "no:xdist",
               "-p", "no:cacheprovider", "."]
    inside = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert inside.returncode == 0 and "1 passed" in inside.stdout, inside.stdout + inside.stderr
    (tmp_path / "solutions" / "tests" / "test_astray.py").write_text(marked, encoding="utf-8")
    astray = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    said = astray.stdout + astray.stderr
    assert astray.returncode != 0 and "passed" not in astray.stdout, said
    assert "1 test(s) marked `book` outside solutions/tests/book/" in said and "test_astray.py::test_page" in said, said


def test_a_group_with_a_long_test_is_handed_out_first(tmp_path: Path) -> None:
    """pytest-xdist hands out the group with the most tests first: a file of one long test came last and ended the
    run alone. One worker runs the groups in the order they are handed out, by weight (suite_times._weight): the
    `long` one first (60), one `slow` test (10), two `grading` tests (3 each), five quick ones, two quick ones.
    Without the plugin the long file runs last; with the plugin but not its order (checked by hand), the
    collection's order: alpha, beta, delta, gamma, omega."""
    for name, count, mark in (("alpha", 2, ""), ("beta", 5, ""), ("gamma", 1, "@pytest.mark.slow\n"),
                              ("delta", 2, "@pytest.mark.grading\n")):
        (tmp_path / f"test_{name}.py").write_text(
            f"import os\nimport pytest\n\n{mark}@pytest.mark.parametrize('n', range({count}))\ndef test_{name}(n):\n"
            f"    open(os.environ['RAN_LOG'], 'a').write('{name}\\n')\n", encoding="utf-8")
    (tmp_path / "test_omega.py").write_text(
        "import os\nimport pytest\n\n@pytest.mark.long\ndef test_omega():\n"
        "    open(os.environ['RAN_LOG'], 'a').write('omega\\n')\n", encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")

    def order(*plugin: str) -> list[str]:
        log = tmp_path / "ran.log"
        log.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", *plugin, "-n", "1", "--dist", "loadgroup",
                               "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning", "."],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "RAN_LOG": str(log)})
        assert done.returncode == 0 and "11 passed" in done.stdout, done.stdout + done.stderr
        return list(dict.fromkeys(log.read_text(encoding="utf-8").split()))

    assert order("-p", "course_admin.measure.suite_times") == ["omega", "gamma", "delta", "beta", "alpha"]
    assert order()[-1] == "omega"  # without the plugin: collected last, run last
