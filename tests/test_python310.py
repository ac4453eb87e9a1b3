"""perfci runs on Python 3.10 (what GPU runner images ship; issue 36).

The suite itself runs on 3.11. What keeps the package 3.10-compatible: vermin finds no newer
language feature or standard-library name in perfci/ (here); the few names 3.11 added come from
perfci/core/compat.py, tested below; and scripts/check-install installs perfci on a real 3.10
where one is installed and parses real profiles with it (tests/test_check_install.py).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from perfci.core import compat
from perfci.core.compat import StrEnum, parse_iso_datetime, without_possessive

ROOT = Path(__file__).resolve().parents[1]
VERMIN = Path(sys.executable).with_name("vermin")


def test_vermin_finds_nothing_newer_than_python_310_in_the_package() -> None:
    if not VERMIN.exists():
        pytest.skip("vermin is not installed in this venv (requirements/lock.txt has it)")
    # --eval-annotations: annotations are strings here (from __future__), yet a name in them
    # must exist where typing.get_type_hints evaluates them (pydantic, typer do).
    done = subprocess.run(
        [
            str(VERMIN),
            "--target=3.10-",
            "--violations",
            "--no-tips",
            "--eval-annotations",
            "--backport",
            "typing_extensions",
            "perfci",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


#: The modules that pick a 3.11 name or its 3.10 stand-in.
COMPAT_MODULES = ("compat.py", "tomlcompat.py")


def test_only_compat_imports_what_python_311_added() -> None:
    newer = re.compile(
        r"^\s*(?:import tomllib|from enum import .*\bStrEnum\b|from typing import .*\bSelf\b"
        r"|from datetime import .*\bUTC\b)",
        re.M,
    )
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "perfci").rglob("*.py")
        if path.name not in ("compat.py", "tomlcompat.py")
        and newer.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_no_pattern_outside_compile_linear_uses_possessive_or_atomic_syntax() -> None:
    """3.10's re refuses ``*+`` and ``(?>``: such a pattern must go through compile_linear."""
    offenders = []
    for path in (ROOT / "perfci").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
                continue
            for arg in node.args[:1]:
                value = arg.value if isinstance(arg, ast.Constant) else None
                text = value.decode("latin-1") if isinstance(value, bytes) else value
                if isinstance(text, str) and without_possessive(text) != text:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def test_str_enum_members_are_their_values() -> None:
    class Colour(StrEnum):
        RED = "red"

    assert str(Colour.RED) == "red" and f"{Colour.RED}" == "red" and f"{Colour.RED:>5}" == "  red"
    assert Colour.RED == "red" and Colour("red") is Colour.RED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-28T01:02:03Z", datetime(2026, 11, 28, 1, 2, 3, tzinfo=timezone.utc)),
        (
            "2026-11-28T01:02:03.5+02:00",
            datetime(2026, 11, 28, 1, 2, 3, 500000, tzinfo=timezone(timedelta(hours=2))),
        ),
        ("2026-11-28 01:02:03.1234567", datetime(2026, 11, 28, 1, 2, 3, 123456)),
        ("2027-01-31", datetime(2027, 1, 31)),
    ],
)
def test_iso_times_read_as_python_311_reads_them(text: str, expected: datetime) -> None:
    assert parse_iso_datetime(text) == expected
    assert compat.UTC is timezone.utc


def test_iso_time_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_iso_datetime("last tuesday")


@pytest.mark.parametrize(
    ("pattern", "plain"),
    [
        (r"\s*+(\d++)\s++(\S++)", r"\s*(\d+)\s+(\S+)"),
        (r"(?>.+?\] with \[).+\.py\]", r"(?:.+?\] with \[).+\.py\]"),
        (r"a{2,3}+b", r"a{2,3}b"),
        (r"[]+]++x", r"[]+]+x"),  # a "+" inside a class is a member
        (r"[^]+]*+", r"[^]+]*"),
        (r"\++", r"\++"),  # an escaped "+" then a plain quantifier
        (r"(?:a|b)*+(?=x)", r"(?:a|b)*(?=x)"),
        (r"\(\d++\)", r"\(\d+\)"),
    ],
)
def test_without_possessive(pattern: str, plain: str) -> None:
    assert without_possessive(pattern) == plain
    re.compile(plain)


def test_the_package_patterns_match_the_same_without_possessive_syntax() -> None:
    """What 3.10 gets matches what 3.11 gets, on the lines the parsers' tests read."""
    from perfci.core import units
    from perfci.formats.nvprof import nvprof
    from perfci.formats.workload import _kv_tokenizer

    samples = {
        units._DURATION: ["12.5 ms", " 1,234 us", "3e-3s", "abc", "1.5 ns  "],
        nvprof._ROW: [
            " GPU activities:   97.66%  4.91062s      1200  4.0922ms  3.9000ms  4.2000ms  sgemm",
            "                 2.34%  117.62ms   600  196.03us  1.0000us  1.2000ms  [CUDA memcpy]",
            "API calls:  no",
        ],
        _kv_tokenizer._PIECES: ["a=1,b=[1, 2],c=x(y)z", "k='q'", "bad"],
    }
    for compiled, texts in samples.items():
        plain = re.compile(without_possessive(compiled.pattern), compiled.flags)
        for text in texts:
            got = compiled.match(text)
            assert (got and got.groups()) == ((m := plain.match(text)) and m.groups()), text
