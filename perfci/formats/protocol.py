"""What every format module is: the ``FormatParser`` protocol and the ``Head`` it sniffs.

A format is one module (``formats/<family>/<name>.py``) whose module-level names satisfy
``FormatParser``; ``registry.PARSERS`` lists the modules themselves, so mypy checks each one
against the protocol and a module that drifts (a renamed ``parse``, a missing ``options``
keyword) fails type checking rather than a user's upload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from perfci.core.model import Profile


@dataclass(frozen=True, slots=True)
class Head:
    """The first bytes of a file, decompressed when gzip, and their text decoding."""

    raw: bytes
    text: str
    gzipped: bool


class FormatParser(Protocol):
    """A profile format: its name, a one-line description, a sniffer and a parser.

    Attributes
    ----------
    NAME
        The format name users pass to ``--format``; also ``Profile.format``.
    DESCRIPTION
        One line for ``perfci formats``.
    """

    # Read-only properties so that a module's plain ``NAME = "..."`` satisfies them.
    @property
    def NAME(self) -> str: ...  # noqa: N802 - module constants are upper case

    @property
    def DESCRIPTION(self) -> str: ...  # noqa: N802 - module constants are upper case

    def sniff(self, head: Head) -> bool:
        """Whether the start of a file looks like this format (content only, never its name).

        Parameters
        ----------
        head
            The first bytes of the file, gunzipped when it is gzip.

        Returns
        -------
        bool
            True when this parser should read the file.
        """
        ...

    def parse(self, path: Path, *, options: Mapping[str, str]) -> list[Profile]:
        """The profiles in ``path``.

        Parameters
        ----------
        path
            The file to read (plain or gzip).
        options
            Format-specific ``key=value`` options from the command line.

        Returns
        -------
        list[Profile]
            One profile per run the file holds.

        Raises
        ------
        ParseError
            On input the format cannot read, naming the file and, where known, the line.
        """
        ...
