"""The Jinja2 environment of every Markdown report: names escaped by a filter, never raw."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2

from perfci.report import formatting as fmt
from perfci.report.escape import md_escape, visible


def markdown_template(name: str, filters: dict[str, Callable[..., Any]]) -> jinja2.Template:
    """Template ``name`` from ``perfci/report/templates`` with the shared Markdown filters.

    ``md`` escapes a name (optionally shortened; invisible format characters shown as
    ``<U+XXXX>``), ``sha`` shows a short commit, and the number
    filters format as the reports do; ``filters`` adds the template's own.
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("perfci.report", "templates"),
        autoescape=False,  # Markdown, not HTML: escaping is the `md` filter's job
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    shared: dict[str, Callable[..., Any]] = {
        "md": _md,
        "sha": _sha,
        "pct": fmt.pct,
        "share": fmt.share,
        "dur": fmt.duration,
        "delta": fmt.delta,
    }
    env.filters.update({**shared, **filters})
    return env.get_template(name)


def _md(text: str, max_len: int | None = None) -> str:
    # visible() first: a name holding U+202E must not read reversed (issue 13).
    return md_escape(visible(text), max_len=max_len)


def _sha(sha: str | None) -> str:
    return md_escape(fmt.short_sha(sha))
