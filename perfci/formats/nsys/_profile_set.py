"""Nsight Systems ``nsys stats`` output → its profiles: ``ProfileSet`` splits one file (a new
profile at a ``Profiling:`` line, a new report file, or a report that repeats), each profile's
rows going to a ``_profiles.ProfileBuilder``, and labels them after their report files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from perfci.core.model import Profile
from perfci.formats.nsys._profiles import ProfileBuilder
from perfci.formats.nsys._reports import REPORTS, ReportSpec


def unique_labels(labels: list[str | None], stem: str) -> list[str]:
    """Labels for a file's profiles: unlabeled ones named after the file, repeats numbered."""
    out: list[str] = []
    taken: set[str] = set()
    repeats: dict[str, int] = {}
    for index, label in enumerate(labels, start=1):
        base = label or (stem if len(labels) == 1 else f"{stem}#{index}")
        candidate = base
        while candidate in taken:
            repeats[base] = repeats.get(base, 1) + 1
            candidate = f"{base}#{repeats[base]}"
        taken.add(candidate)
        out.append(candidate)
    return out


class ProfileSet:
    """Splits one file into profiles: a new one starts at a ``Profiling:`` line, at a new report
    file (``[1/8] ... x.nsys-rep``, ``Processing [x.sqlite]``), or when a report repeats."""

    def __init__(self, *, format: str, source: str) -> None:
        self.format = format
        self.source = source
        self.current = ProfileBuilder(format=format, source=source)
        self.done: list[ProfileBuilder] = []

    def boundary(self) -> None:
        if self.current.announced or self.current.metrics:
            self.done.append(self.current)
            self.current = ProfileBuilder(format=self.format, source=self.source)

    def start(self, hint: str, metadata: dict[str, Any]) -> None:
        """A ``Profiling: ...`` line: always a new profile."""
        self.boundary()
        self.current.label_hint = hint
        self.current.metadata.update(metadata)

    def report_file(self, name: str) -> None:
        """``x.nsys-rep`` / ``x.qdrep`` / ``x.sqlite``: the profile's label is ``x``."""
        stem = re.sub(r"\.(nsys-rep|qdrep|sqlite|qdstrm)$", "", name.replace("\\", "/"))
        stem = stem.rsplit("/", 1)[-1]
        if self.current.announced and self.current.label not in (None, stem):
            self.boundary()
        self.current.label = stem
        self.current.metadata.setdefault("report_file", name)

    def announce(self, report: str, index: tuple[int, int] | None = None) -> ReportSpec | None:
        """A report starts (or is skipped); a report already seen starts a new profile."""
        if report in self.current.announced:
            self.boundary()
        self.current.announced.add(report)
        self.current.metadata.setdefault("reports", []).append(report)
        if index is not None:
            self.step(index)
        return REPORTS.get(report)

    def step(self, index: tuple[int, int]) -> None:
        """``[k/n]``: remembered to tell a profile cut short."""
        seen, _ = self.current.progress
        self.current.progress = (max(seen, index[0]), index[1])

    def profiles(self, stem: str) -> list[Profile]:
        self.boundary()
        kept = [builder for builder in self.done if builder.metrics]
        labels = unique_labels([b.label or b.label_hint for b in kept], stem)
        out = []
        for builder, label in zip(kept, labels, strict=True):
            seen, total = builder.progress
            if seen < total:
                builder.warnings.append(
                    f"only steps 1-{seen} of the {total} that nsys "
                    "announced appear: the output may be cut short"
                )
            out.append(builder.build(label))
        return out


def file_stem(path: Path) -> str:
    """``report1`` for ``report1.txt.gz``."""
    name = path.name
    for suffix in (".gz", ".txt", ".log", ".csv", ".out", ".md"):
        name = name.removesuffix(suffix)
    return name or path.name
