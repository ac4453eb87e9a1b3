"""What the history branch holds: perfci's files only, in a tree of plain files.

``README.md`` and :data:`MARKER` at the root (the marker in the branch's first commit says that
perfci made the branch), and one compressed run document per file under
``runs/<benchmark>/`` (:mod:`perfci.history.documents`). Anything else, an exec bit, a link or a
submodule makes a branch one perfci did not write (:func:`perfci_file`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The file at the branch's root that tells a human what the branch is.
README = """# perfci history

Performance runs recorded by `perfci check` on the base branch, one gzip-compressed JSON
document per run under `runs/<benchmark>/`. perfci reads this branch into its embedded store
at the start of every job (`history = "git:BRANCH"`). Written by CI only; do not edit.
"""
#: The file at the root of the branch's first commit that says perfci made the branch.
MARKER = ".perfci-history"
MARKER_TEXT = (
    "This branch was made by perfci for its run history. perfci writes only README.md, this\n"
    "file and runs/<benchmark>/*.json.gz here, and refuses a branch holding anything else.\n"
)
_RUN_FILE = re.compile(r"runs/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+\.json\.gz")


@dataclass(frozen=True, slots=True)
class BranchFile:
    """One file of a commit on the branch: its path, blob id and size in bytes."""

    path: str
    blob: str
    size: int


def over_cap(
    files: Mapping[str, BranchFile], *, max_bytes: int, prefix: str, keep: set[str]
) -> list[str]:
    """The oldest run files to drop so that the runs fit (80 % of the cap, for hysteresis)."""
    runs = sorted(
        (f for f in files.values() if f.path.startswith(prefix)),
        key=lambda f: (Path(f.path).name, f.path),
    )
    total = sum(f.size for f in runs)
    if total <= max_bytes:
        return []
    target, dropped = int(max_bytes * 0.8), []
    for candidate in runs:
        if total <= target:
            break
        if candidate.path not in keep:
            dropped.append(candidate.path)
            total -= candidate.size
    return dropped


def parse_tree(out: bytes) -> Iterator[BranchFile]:
    for record in out.decode().split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        _mode, kind, blob, size = meta.split()
        if kind == "blob":
            yield BranchFile(path=path, blob=blob, size=int(size))


def perfci_file(mode: str, path: str) -> bool:
    """A file perfci writes on the branch: a plain file (no exec bit, link or submodule)."""
    return mode == "100644" and (path in ("README.md", MARKER) or bool(_RUN_FILE.fullmatch(path)))
