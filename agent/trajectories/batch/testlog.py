"""Which tests passed, read from a test run's output (SWE-bench grading).

    statuses(output) -> {test id: "PASSED" | "FAILED" | "ERROR" | "SKIPPED" | "XFAIL" | "XPASS"}

Read: pytest's `-rA` summary (`PASSED tests/t.py::test_a`) and its `-v` lines
(`tests/t.py::test_a PASSED [ 50%]`); unittest's `-v` lines
(`test_a (pkg.tests.T.test_a) ... ok`), whose id is the dotted name (`pkg.tests.T.test_a`),
also under Django's spelling `test_a (pkg.tests.T)`. A test reported twice keeps its worst
status (a pass then an error at teardown is an error).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_PYTEST_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_UNITTEST_NAME = re.compile(r"^(\w+) \(([\w.]+)\)(.*)$")
_UNITTEST_END = re.compile(r" \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")
_UNITTEST_STATUS = {"ok": "PASSED", "FAIL": "FAILED", "ERROR": "ERROR", "skipped": "SKIPPED",
                    "expected failure": "XFAIL", "unexpected success": "XPASS"}
_RANK = {"PASSED": 0, "XFAIL": 0, "SKIPPED": 1, "XPASS": 2, "FAILED": 3, "ERROR": 4}


def statuses(output: str) -> dict[str, str]:
    found: dict[str, str] = {}

    def note(test: str, status: str) -> None:
        if _RANK[status] >= _RANK.get(found.get(test, "PASSED"), 0) or test not in found:
            found[test] = status

    pending: tuple[str, str] | None = None  # a unittest name whose status is on the next line
    for line in output.splitlines():
        line = line.strip()
        if match := _PYTEST_SUMMARY.match(line):
            note(match.group(2), match.group(1))
        elif match := _PYTEST_VERBOSE.match(line):
            note(match.group(1), match.group(2))
        elif match := _UNITTEST_NAME.match(line):
            name, dotted, rest = match.groups()
            end = _UNITTEST_END.search(rest)
            pending = None if end else (name, dotted)
            if end:
                _unittest(note, name, dotted, end.group(1))
            continue
        elif pending and (end := _UNITTEST_END.search(line)):  # after a docstring line
            _unittest(note, *pending, end.group(1))
        pending = None
    return found


def _unittest(note: Callable[[str, str], None], name: str, dotted: str, word: str) -> None:
    status = _UNITTEST_STATUS[word]
    if dotted.endswith(f".{name}"):  # Python 3.11+: the full dotted name
        note(dotted, status)
        note(f"{name} ({dotted.removesuffix('.' + name)})", status)
    else:
        note(f"{dotted}.{name}", status)
        note(f"{name} ({dotted})", status)
