"""Pathological inputs for regular expressions, built from each pattern's own pieces (issue 31).

A backtracking engine is slow on a string that almost matches a pattern many times over: the
pattern's literals repeated (``'iteration 1/1 |' * 4369``), a run of what one quantifier takes
that the next can take too (2,048 spaces between a key and a missing colon), a bracket opened
and never closed (``'Processing [' + '] with [' * N``). :func:`adversarial` builds such
strings for any compiled pattern from its parse tree; :func:`format_patterns` lists every
module-level pattern of ``perfci.formats`` with the way its module applies it (``search``
scans every start position, ``match`` tries one), which is what a hang guard must test.

Used by ``tests/test_format_redos.py`` (hang guards) and ``benchmarks/redos.py`` (timings).
"""

from __future__ import annotations

import ast
import importlib
import itertools
import pkgutil
import re
import re._constants as sc  # type: ignore[import-not-found,unused-ignore]
import re._parser as sp  # type: ignore[import-not-found,unused-ignore]
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: What a category (``\s``, ``\d``, ``\w`` …) stands for in a built string.
_CATEGORY = {
    sc.CATEGORY_SPACE: " ",
    sc.CATEGORY_NOT_SPACE: "x",
    sc.CATEGORY_DIGIT: "0",
    sc.CATEGORY_NOT_DIGIT: "a",
    sc.CATEGORY_WORD: "a",
    sc.CATEGORY_NOT_WORD: " ",
    sc.CATEGORY_LINEBREAK: "\n",
    sc.CATEGORY_NOT_LINEBREAK: "a",
}
#: Characters tried for a negated class (``[^:]``): the first few it accepts.
_PROBE = " \tax0-.:|[](),=/_#*%\"'<>{}@~+\\;!?$&^`"
#: Methods that try the pattern at every position of the string.
SCANNING = frozenset({"search", "finditer", "findall", "sub", "subn", "split"})


def _class_chars(items: list[tuple[Any, Any]]) -> list[str]:
    chars: list[str] = []
    for op, av in items:
        if op is sc.LITERAL:
            chars.append(chr(av))
        elif op is sc.RANGE:
            chars += [chr(av[0]), chr(av[1])]
        elif op is sc.CATEGORY:
            chars.append(_CATEGORY.get(av, "a"))
    if any(op is sc.NEGATE for op, _ in items):
        banned = set(chars)
        return [c for c in _PROBE if c not in banned][:3]
    return chars


def _char(op: Any, av: Any) -> str:
    if op is sc.LITERAL:
        return chr(av)
    if op is sc.NOT_LITERAL:
        return "a" if av != ord("a") else "b"
    if op is sc.ANY:
        return "a"
    if op is sc.IN:
        chars = _class_chars(av)
        return chars[0] if chars else "a"
    return ""


def _body(op: Any, av: Any) -> list[Any] | None:
    """The sub-sequence of a group-like node (its first alternative for a branch)."""
    if op is sc.SUBPATTERN:
        return list(av[3])
    if op is sc.ATOMIC_GROUP:
        return list(av)
    if op is sc.BRANCH:
        return list(av[1][0])
    if op in (sc.MAX_REPEAT, sc.MIN_REPEAT, sc.POSSESSIVE_REPEAT):
        return list(av[2])
    return None


def happy(sequence: list[Any]) -> str:
    """A string the sequence matches, or nearly: each repeat at its minimum (one at least)."""
    out = []
    for op, av in sequence:
        if op in (sc.LITERAL, sc.NOT_LITERAL, sc.ANY, sc.IN):
            out.append(_char(op, av))
        elif op in (sc.MAX_REPEAT, sc.MIN_REPEAT, sc.POSSESSIVE_REPEAT):
            out.append(happy(list(av[2])) * max(av[0], 1))
        elif (body := _body(op, av)) is not None:
            out.append(happy(body))
    return "".join(out)


@dataclass
class _Pieces:
    """What a pattern is made of, in pattern order."""

    literals: list[str] = field(default_factory=list)  # runs of literal characters
    chars: set[str] = field(default_factory=lambda: {" ", "\t"})  # what classes accept
    repeated: set[str] = field(default_factory=lambda: {" ", "\t"})  # what repeats take
    prefixes: list[tuple[str, str]] = field(default_factory=list)  # (matched so far, next)


def _walk(sequence: list[Any], before: str, pieces: _Pieces, repeated: bool = False) -> None:
    run: list[str] = []
    done = before
    for index, (op, av) in enumerate(sequence):
        if op is sc.LITERAL:
            run.append(chr(av))
            pieces.chars.add(chr(av))
            if repeated:
                pieces.repeated.add(chr(av))
            done += chr(av)
            continue
        if run:
            pieces.literals.append("".join(run))
            run.clear()
        rest = happy(sequence[index:])
        pieces.prefixes.append((done, rest))
        if op in (sc.NOT_LITERAL, sc.ANY):
            pieces.chars.add(_char(op, av))
            if repeated:
                pieces.repeated.add(_char(op, av))
        elif op is sc.IN:
            pieces.chars.update(_class_chars(av))
            if repeated:
                pieces.repeated.update(_class_chars(av))
        elif op is sc.BRANCH:
            for alternative in av[1]:
                _walk(list(alternative), done, pieces, repeated)
        elif op in (sc.ASSERT, sc.ASSERT_NOT):
            _walk(list(av[1]), done, pieces, repeated)
            continue
        elif (body := _body(op, av)) is not None:
            loops = op in (sc.MAX_REPEAT, sc.MIN_REPEAT, sc.POSSESSIVE_REPEAT) and av[1] > 1
            _walk(body, done, pieces, repeated or loops)
        done += happy([(op, av)])
    if run:
        pieces.literals.append("".join(run))
    pieces.prefixes.append((done, ""))


def _repeat(unit: str, size: int, lead: str = "") -> str:
    return lead + unit * max(1, (size - len(lead)) // max(len(unit), 1))


def adversarial_text(pattern: str, flags: int, size: int, *, lean: bool = False) -> list[str]:
    """Strings of about ``size`` characters that make a backtracking matcher of ``pattern``
    work hard (see the module docstring), each also with a character no pattern expects
    appended, so that a match has to fail at the very end.

    ``lean``: the kinds of string that found every slow pattern of issue 31, a fifth of the
    whole set or so (runs only of what a repeat takes, one ending each), for a test's budget.
    """
    tree = list(sp.parse(pattern, flags))
    pieces = _Pieces()
    _walk(tree, "", pieces)
    literals = list(dict.fromkeys(piece for piece in pieces.literals if piece))
    out: dict[str, None] = {}
    for char in sorted(pieces.repeated if lean else pieces.chars):
        out[_repeat(char, size)] = None
        out["x" + _repeat(char, size) + "x"] = None
        half = char * (size // 2)
        out[half + "x" + half] = None
    for literal in literals:
        out[_repeat(literal, size)] = None
    for first, second in itertools.pairwise(literals):
        out[_repeat(first + second, size)] = None
    for done, rest in dict.fromkeys(pieces.prefixes):
        if done:
            out[_repeat(done, size)] = None  # the reported 'iteration 1/1 |' * N
        following = rest[:1]
        if following:
            out[_repeat(following, size, done)] = None  # matched so far, then a long run
            if not lean:
                out[_repeat(rest, size, done)] = None
        for literal in [literal for literal in literals if literal in rest][: 1 if lean else None]:
            out[_repeat(literal, size, done)] = None  # 'Processing [' + '] with [' * N
    return [text + end for text in out for end in (("\x01",) if lean else ("", "\x01"))]


def adversarial(pattern: re.Pattern[Any], size: int, *, lean: bool = False) -> list[Any]:
    """:func:`adversarial_text` for a compiled pattern; bytes for a bytes pattern."""
    if isinstance(pattern.pattern, bytes):
        source = pattern.pattern.decode("latin-1")
        texts = adversarial_text(source, pattern.flags & ~re.UNICODE, size, lean=lean)
        return [text.encode("latin-1", "replace") for text in texts]
    return list(adversarial_text(pattern.pattern, pattern.flags, size, lean=lean))


@dataclass(frozen=True)
class FormatPattern:
    """A module-level pattern of ``perfci.formats`` and how its module applies it."""

    name: str  # module.NAME, the first module that defines it
    pattern: re.Pattern[Any]
    methods: frozenset[str]  # the Pattern methods called on it anywhere in perfci.formats

    @property
    def scanning(self) -> bool:
        """Tried at every position (or used in a way the analysis cannot see)."""
        return not self.methods or bool(self.methods & SCANNING)


def _method_calls(root: Path) -> dict[str, set[str]]:
    """``NAME.method(`` calls in the sources under ``root``: pattern name → methods."""
    calls: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
                if isinstance(name, str):
                    calls.setdefault(name, set()).add(node.func.attr)
    return calls


def format_patterns(package: str = "perfci.formats") -> list[FormatPattern]:
    """Every module-level compiled pattern under ``package`` (once per distinct pattern)."""
    root = importlib.import_module(package)
    calls = _method_calls(Path(next(iter(root.__path__))))
    seen: dict[tuple[Any, int], FormatPattern] = {}
    modules = [root] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(root.__path__, f"{package}.")
    ]
    for module in modules:
        for name, value in vars(module).items():
            for label, pattern in _patterns_in(name, value):
                if (pattern.pattern, pattern.flags) in seen:
                    continue
                used = calls.get(name, set()) if label == name else set()  # [i]: not seen
                methods = frozenset(used & (SCANNING | {"match", "fullmatch"}))
                seen[(pattern.pattern, pattern.flags)] = FormatPattern(
                    f"{module.__name__}.{label}", pattern, methods
                )
    return list(seen.values())


def _patterns_in(name: str, value: object) -> list[tuple[str, re.Pattern[Any]]]:
    """A module-level pattern, or those of a table of them (``((pattern, role), …)``)."""
    if isinstance(value, re.Pattern):
        return [(name, value)]
    if not isinstance(value, tuple | list):
        return []
    found = []
    for index, item in enumerate(value):
        parts = item if isinstance(item, tuple) else (item,)
        found += [(f"{name}[{index}]", p) for p in parts if isinstance(p, re.Pattern)]
    return found
