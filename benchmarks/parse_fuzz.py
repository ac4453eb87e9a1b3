"""A mutational fuzz campaign over every real profile: parse errors only, never a crash.

Usage::

    .venv/bin/python benchmarks/parse_fuzz.py [--minutes 10] [--seed 1] [--out DIR]
        [--max-file-mb 3]

``tests/test_parse_fuzz.py`` checks a fixed set of examples on every CI run (derandomised, a
few files); this script explores further, for as long as it is given. Each input is a seed or
corpus file of ``../shared`` (gzip inflated first and deflated again after) changed one to
three times: a number replaced by another (``nan``, ``inf``, ``1e309``, ``-1``, the largest
float, an integer beyond 64 bits, an empty string...) once or many times, bytes flipped, a
line repeated, removed or swapped with another, the file cut short, a token inserted, or
text no store keeps (NUL, a lone surrogate, raw or as a JSON escape) put just inside a quote.
``registry.parse_file`` must return profiles whose numbers are all finite, or raise
``ParseError`` / ``UnknownFormatError`` with a message; anything else is a finding.

Prints one line per distinct finding (exception type and the ``perfci`` line it came from,
the file it came from) as it is found, each input kept in ``--out``, and at the end the number
of inputs tried. Exit status 1 when there was a finding.
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.core.errors import ParseError, UnknownFormatError
from perfci.core.model import Profile
from perfci.formats import registry

SHARED = Path(__file__).resolve().parents[2] / "shared"
_NUMBER = re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?")
#: What a number is replaced by, or a token inserted anywhere.
_TOKENS = (
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"1e309",
    b"-1",
    b"0",
    b"-0",
    b"99999999999999999999999999",
    b"1e-320",
    b"1.7976931348623157e308",
    b"",
    b"\x00",
    b"\xff\xfe",
    b'"',
    b",",
    b"|",
    b"\n",
    b"{",
    b"[",
    b"]",
    b"}",
    b"null",
    b"true",
    b"\\u0000",
    b"\\ud800",
)
#: Inserted just inside a quoted text (a JSON string, a CSV field): what no store keeps in a
#: text, raw or as a JSON escape, and bytes that are not UTF-8 (a corrupted Nsight Compute
#: report's NUL in its host name was answered 503 by the service on PostgreSQL).
_IN_TEXT = (b"\x00", b"\\u0000", b"\\ud800", b"\\udcff", b"\xff", b"\xed\xa0\x80")
#: Numbers looked for in the first this many bytes only (a regex over megabytes each time is
#: most of the campaign's time otherwise).
_SEARCHED = 200_000


def _numbers(data: bytes) -> list[re.Match[bytes]]:
    return list(_NUMBER.finditer(data[:_SEARCHED]))


def _replace_number(data: bytes, rng: random.Random) -> bytes:
    found = _numbers(data)
    if not found:
        return data
    match = rng.choice(found)
    return data[: match.start()] + rng.choice(_TOKENS) + data[match.end() :]


def _replace_numbers(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(2, 20)):
        data = _replace_number(data, rng)
    return data


def _flip_bytes(data: bytes, rng: random.Random) -> bytes:
    changed = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        changed[rng.randrange(len(changed))] = rng.randrange(256)
    return bytes(changed)


def _repeat_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    at = rng.randrange(len(lines))
    lines.insert(at, lines[at])
    return b"\n".join(lines)


def _remove_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def _swap_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def _cut(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _insert_token(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + rng.choice(_TOKENS) + data[at:]


def _into_text(data: bytes, rng: random.Random) -> bytes:
    """One of :data:`_IN_TEXT` after the first quote from a random place on (else the first)."""
    quote = data.find(b'"', rng.randrange(len(data)))
    quote = data.find(b'"') if quote < 0 else quote
    if quote < 0:
        return _insert_token(data, rng)
    return data[: quote + 1] + rng.choice(_IN_TEXT) + data[quote + 1 :]


MUTATIONS: tuple[Callable[[bytes, random.Random], bytes], ...] = (
    _replace_number,
    _replace_numbers,
    _flip_bytes,
    _repeat_line,
    _remove_line,
    _swap_lines,
    _cut,
    _insert_token,
    _into_text,
)


def real_files(max_bytes: int) -> list[Path]:
    """The seeds and corpus files of ``../shared`` up to ``max_bytes`` each."""
    found = [p for p in (SHARED / "corpus").rglob("*") if p.is_file()]
    found += [p for p in (SHARED / "seeds").glob("0*") if p.is_file()]
    return sorted(p for p in found if p.stat().st_size <= max_bytes)


def mutated(path: Path, rng: random.Random) -> bytes | None:
    """The bytes of ``path`` changed one to three times (inside its gzip when it is one)."""
    raw = path.read_bytes()
    packed = raw[:2] == b"\x1f\x8b"
    if packed:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError):
            return None
    if not raw:
        return None
    data = raw
    for _ in range(rng.randint(1, 3)):
        data = rng.choice(MUTATIONS)(data, rng) or data
    return gzip.compress(data) if packed else data


def finding(path: Path) -> tuple[str, str] | None:
    """``None`` when parsing ``path`` is right; else (where, what) of what went wrong."""
    try:
        profiles = registry.parse_file(path)
    except (ParseError, UnknownFormatError) as exc:
        return None if str(exc) else ("empty message", type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding itself
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "perfci" in f.filename]
        last = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
        place = last.filename.split("perfci/")[-1]
        return f"{type(exc).__name__} at {place}:{last.lineno}", str(exc)[:200]
    for profile in profiles:
        if not isinstance(profile, Profile):
            return "not a Profile", type(profile).__name__
        for metric in profile.metrics:
            numbers = (
                metric.total_ns,
                metric.self_ns,
                metric.avg_ns,
                metric.min_ns,
                metric.max_ns,
                metric.value,
            )
            for number in numbers:
                if isinstance(number, float) and not math.isfinite(number):
                    where = f"non-finite number from {profile.format}"
                    return where, f"{number} in {metric.name!r}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="where findings are kept")
    parser.add_argument("--max-file-mb", type=float, default=3.0)
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"no {SHARED}: the campaign mutates its real files", file=sys.stderr)
        return 2
    files = real_files(int(args.max_file_mb * 1e6))
    out = args.out or Path(tempfile.mkdtemp(prefix="perfci-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.minutes * 60
    seen: dict[str, Path] = {}
    tried = 0
    with tempfile.TemporaryDirectory() as folder:
        while time.monotonic() < deadline:
            source = rng.choice(files)
            data = mutated(source, rng)
            if data is None:
                continue
            path = Path(folder) / source.name  # its name: some formats are told by it
            path.write_bytes(data)
            tried += 1
            found = finding(path)
            if found is None or found[0] in seen:
                continue
            kept = out / f"finding_{len(seen) + 1}_{source.name}"
            kept.write_bytes(data)
            seen[found[0]] = kept
            print(f"{found[0]}: {found[1]} (from {source.relative_to(SHARED)}; kept as {kept})")
    print(f"{tried:,} inputs from {len(files)} files, {len(seen)} distinct findings")
    return 1 if seen else 0


if __name__ == "__main__":
    raise SystemExit(main())
