"""Errors whose messages are written for the user who will read them.

::

    PerfciError
    ├── ParseError            a profile could not be read (names file, line, what was expected)
    │   ├── NoMeasurements    a readable file with no measurement yet (skipped in a folder)
    │   └── InputTooLarge     a compressed input inflates beyond the configured cap
    ├── InvalidValue          a value of an upload is not finite, negative, or overflows
    ├── SampleError           a sample cannot be compared (NaN, infinite, negative time)
    ├── RunConflict           a retried run (same CI run and attempt) carries different data
    ├── UnknownFormatError    no parser recognises the content, or --format names no parser
    ├── ConfigError           settings or flags are invalid
    ├── StorageError          the database refused or failed an operation
    ├── NotFoundError         an id or name does not exist
    ├── AuthError             a token is missing, wrong, revoked, or lacks a scope
    ├── RequestTooLarge       a request body is over the service's limit (HTTP 413)
    ├── UnsupportedMediaType  a request body's content type is not one the route reads (415)
    ├── BenchmarkFailed       a repeat of the benchmark command exited non-zero
    ├── GitHubError           the GitHub API refused or failed a request
    └── SlackError            Slack refused or failed a message

Each boundary (CLI, HTTP server) catches ``PerfciError`` once and shows ``str(error)``;
third-party errors are translated where they enter, chained with ``from``.
"""

from __future__ import annotations


class PerfciError(Exception):
    """Base of all errors perfci reports to users."""

    exit_code = 2


class ParseError(PerfciError):
    """A profile could not be parsed. ``str()`` reads ``FILE:LINE: message``."""

    def __init__(
        self, message: str, *, source: str = "", line: int | None = None, format: str | None = None
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.format = format
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.source or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        fmt = f" ({self.format})" if self.format else ""
        return f"{where}: {self.message}{fmt}"


class NoMeasurements(ParseError):
    """The file is in a format perfci reads but holds no measurement yet.

    A Megatron rank that never prints the training log, a job stopped before its first
    logged interval. Named directly, such a file is refused like any bad input; found in a
    folder or by a benchmark's globs beside its siblings, it is skipped and named instead, so
    that one quiet rank does not stop the whole job's ingest.
    """


class InputTooLarge(ParseError):
    """A (gzip) input inflates beyond the size or ratio cap; the server answers 413."""


class SampleError(PerfciError, ValueError):
    """A sample holds a value that cannot be compared (NaN, infinite or negative time)."""


class InvalidValue(PerfciError, ValueError):
    """A value of an upload cannot be stored: not finite, negative where it can't be, or so
    large that it overflows. Raised before anything is written; names profile, metric, field."""


class RunConflict(PerfciError):
    """A run with the same key (CI run id and attempt) is stored with different content.

    ``run_id`` is the stored run's id; the server answers 409 with it.
    """

    def __init__(self, message: str, *, run_id: int) -> None:
        self.run_id = run_id
        super().__init__(message)


class UnknownFormatError(PerfciError):
    """No parser recognises a file, or a format name is not registered."""


class ConfigError(PerfciError):
    """Invalid settings, flags or configuration files."""


class StorageError(PerfciError):
    """The store failed or refused an operation."""


class DatabaseFailure(StorageError):
    """The database refused or lost a statement; the unit of work was rolled back.

    ``reason`` is the driver's first line, for a message that names what the store was doing.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeyTaken(DatabaseFailure):
    """A unique key was taken by a concurrent writer between our read and our write; the unit
    of work was rolled back, and reading again finds theirs."""


class NotFoundError(PerfciError):
    """An id or name that does not exist."""


class AuthError(PerfciError):
    """A missing, wrong or revoked token, or one without the needed scope."""

    def __init__(self, message: str, *, status: int = 401) -> None:
        self.status = status
        super().__init__(message)


class RequestTooLarge(PerfciError):
    """The request body is over the server's limit (413)."""


class UnsupportedMediaType(PerfciError):
    """The request body's content type is not one the endpoint reads (415)."""


class BenchmarkFailed(PerfciError):
    """A repeat of the benchmark command exited non-zero."""

    def __init__(self, message: str, *, returncode: int, tail: str) -> None:
        self.returncode = returncode
        self.tail = tail
        super().__init__(message)
        # The CLI exits with the benchmark's own code so CI logs show the real failure.
        self.exit_code = returncode if 0 < returncode < 256 else 2


class GitHubError(PerfciError):
    """The GitHub API refused or failed a request."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class SlackError(PerfciError):
    """Slack refused or failed the message."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)
