"""The profile files behind the paths a user gives: files as they are, folders opened.

``perfci parse profiles/`` and ``perfci ingest profiles/`` read every profile file in the folder
(and its subfolders), in natural order (``rep2`` before ``rep10``), so that a CI job can hand
over its output folder. Files no parser recognises there (a README, a log) are skipped and
named; hidden files and folders are not looked at. A folder's file in a format perfci reads
that holds no measurement yet (:class:`~perfci.core.errors.NoMeasurements`: the Megatron log of a
rank that prints no training log) is skipped and named by the reader too.

Links (issue 31): a link inside the folder to a file or folder inside it is followed, each
file read once however many links lead to it; a link leading out of the folder, dangling, or
round in a loop is not followed: it is named among the skipped files, never opened, so nothing
of what it points to is read or quoted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from perfci.core.errors import ConfigError, NoMeasurements, ParseError, UnknownFormatError
from perfci.core.model import Profile
from perfci.formats.registry import detect, get_format, read_head


@dataclass(slots=True)
class Inputs:
    """The files to read, and the files of given folders that were left out.

    ``detected`` names the format found for a folder's file while it was sorted, so that
    reading it does not sniff it again; ``found`` holds the files that came from a folder
    rather than being named.
    """

    files: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    #: Links of given folders that were not followed (also in ``skipped``).
    refused: list[Path] = field(default_factory=list)
    detected: dict[Path, str] = field(default_factory=dict)
    found: set[Path] = field(default_factory=set)


def expand_inputs(paths: Iterable[Path], *, format: str | None = None) -> Inputs:
    """Every path as given, every folder as the profile files in it.

    A file named directly is always kept (a bad one is then refused by its parser, with the
    reason); a folder's files are kept when a parser recognises them (``format``'s, when given).

    Raises
    ------
    ConfigError
        A folder holds no profile file.
    """
    found = Inputs()
    for path in map(Path, paths):
        if not path.is_dir():
            found.files.append(path)
            continue
        files, skipped, refused = _profiles_in(path, format, found.detected)
        if not files:
            raise ConfigError(
                f"{path}: no profile files in this folder"
                + (f" ({len(skipped)} files no parser recognises)" if skipped else "")
                + (
                    f" ({len(refused)} links not followed: out of the folder, dangling, or "
                    "round in a loop)"
                    if refused
                    else ""
                )
                + "; `perfci formats` lists the formats perfci reads"
            )
        found.files += files
        found.found.update(files)
        found.skipped += skipped + refused
        found.refused += refused
    return found


def parse_each(
    inputs: Inputs,
    parse: Callable[[Path, str | None], list[Profile]],
    *,
    format: str | None = None,
    found: bool = False,
    skipped: list[Path] | None = None,
) -> list[list[Profile]]:
    """Each file's profiles, in order (a file named twice is read twice), by ``parse(path,
    format name or None)``.

    A file that holds no measurement yet (:class:`~perfci.core.errors.NoMeasurements`) is refused
    when it was named, and skipped when it came from a folder (or every file was ``found`` by
    a benchmark's globs): appended to ``skipped``, or, when that is not given, named in a
    warning of the first profile. If every file is empty, the first one's reason is raised.
    """
    parsed: list[list[Profile]] = []
    empty: list[NoMeasurements] = []
    for path in inputs.files:
        try:
            parsed.append(parse(path, format or inputs.detected.get(path)))
        except NoMeasurements as exc:
            if not (found or path in inputs.found):
                raise
            empty.append(exc)
            if skipped is not None:
                skipped.append(path)
    if empty and not parsed:
        raise empty[0]
    first = next((profiles for profiles in parsed if profiles), None)
    if empty and skipped is None and first:
        first[0].warnings.extend(f"left out {e.source}: {e.message}" for e in empty)
    return parsed


def _profiles_in(
    folder: Path, format: str | None, detected: dict[Path, str]
) -> tuple[list[Path], list[Path], list[Path]]:
    files: list[Path] = []
    skipped: list[Path] = []
    spec = get_format(format) if format else None
    walk = _Walk(folder)
    for path in sorted(walk.files(), key=_natural):
        try:
            if spec is not None:
                recognised = spec.sniff(read_head(path))
            else:
                detected[path] = detect(path).name
                recognised = True
        except (UnknownFormatError, ParseError):
            recognised = False
        (files if recognised else skipped).append(path)
    return files, skipped, sorted(walk.refused, key=_natural)


class _Walk:
    """The files under a folder, links followed only inside it and each place visited once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root = folder.resolve()
        self.refused: list[Path] = []
        self._seen: set[Path] = {self.root}

    def files(self, folder: Path | None = None) -> Iterable[Path]:
        for path in sorted((self.folder if folder is None else folder).iterdir()):
            if path.name.startswith("."):
                continue
            real = self._inside(path)
            if real is None:
                continue
            if real in self._seen:  # a link back to a folder being read, or read already
                if path.is_symlink():
                    self.refused.append(path)
                continue
            self._seen.add(real)
            if real.is_dir():
                yield from self.files(path)
            elif real.is_file():
                yield path

    def _inside(self, path: Path) -> Path | None:
        """Where ``path`` leads, when inside the folder; else ``None`` (and it is refused)."""
        if not path.is_symlink():
            return path.resolve()
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):  # dangling, or a loop of links
            real = None
        if real is None or not real.is_relative_to(self.root):
            self.refused.append(path)
            return None
        return real


def _natural(path: Path) -> list[tuple[int, int | str]]:
    """``rep2`` before ``rep10``: digit runs compare as numbers."""
    return [
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"(\d+)", str(path))
        if part
    ]
