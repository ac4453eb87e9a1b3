"""What every format module is: the ``FormatParser`` protocol, the ``Head`` it sniffs, and the
``Detector`` that names and sniffs it without importing it.

A format is one module (``formats/<family>/<name>.py``) whose module-level names satisfy
``FormatParser``. Its name, description and sniff live in its family's ``_detectors`` module
as a :class:`Detector` (the reader module re-exports them), so that detection and
``perfci formats`` never import a reader: ``registry.PARSERS`` pairs each detector with the
path of its reader, imported only when a file of that format is read (issue 33: importing all
of them took most of a short command's time). ``tests/test_format_registry.py`` checks every
reader module against the protocol.

This module imports nothing heavy: detectors import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from perfci.core.model import Profile


@dataclass(frozen=True, slots=True)
class Head:
    """The first bytes of a file, decompressed when gzip, and their text decoding."""

    raw: bytes
    text: str
    gzipped: bool


@dataclass(frozen=True, slots=True)
class Detector:
    """A format's name, its line for ``perfci formats`` and its sniff: what detection needs.

    ``sniff`` looks at the content only (never the file name), in time linear in the head's
    length (``tests/test_format_redos.py``), and imports nothing a reader needs.
    """

    name: str
    description: str
    sniff: Callable[[Head], bool]


def detector(sniff: Callable[[Head], bool], description: str) -> Detector:
    """The detector of the format ``sniff`` is named after (``_bmf`` sniffs ``bmf``): the name
    is written once, and ``tests/test_format_registry.py`` checks it against the reader's."""
    return Detector(sniff.__name__.removeprefix("_"), description, sniff)


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
