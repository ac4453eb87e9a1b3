"""``perfci parse``: read profiles and show their metrics, or print the perfci JSON document."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _console
from perfci.cli import _options as opts

if TYPE_CHECKING:
    from perfci.core.model import Metric, Profile


def _show(profile: Profile, top: int) -> None:
    """A table per metric kind: Rich's on a terminal, plain columns in a pipe (a CI log), where
    names are never folded and Rich is not imported (issue 33: ``perfci parse`` starts at once).
    """
    steps = f", {profile.steps} steps" if profile.steps is not None else ""
    header = f"{profile.format}, {len(profile.metrics)} metrics{steps}"
    plain = _console.plain_output()
    if plain:
        typer.echo(f"{profile.label} ({header}) — {profile.source}")
    else:
        from rich.markup import escape

        _console.console.print(
            f"[bold]{escape(profile.label)}[/] ({header}) — {escape(profile.source)}",
            markup=True,
        )
    kinds: dict[str, list[Metric]] = {}
    for metric in profile.metrics:
        kinds.setdefault(metric.kind.value, []).append(metric)
    for kind, metrics in kinds.items():
        columns, rows = _rows(metrics, top)
        title = f"{kind} ({len(metrics)})"
        caption = f"… {len(metrics) - top} more (use --top or --json)" if len(metrics) > top else ""
        if plain:
            typer.echo(_plain_table(title, columns, rows, caption))
        else:
            _rich_table(title, columns, rows, caption)
    if plain:
        typer.echo()
    else:
        _console.console.print()


def _rows(metrics: list[Metric], top: int) -> tuple[list[str], list[list[str]]]:
    """The columns and the first ``top`` rows (largest first) of one kind's table."""
    from perfci.core.units import format_ns

    # A table printed with only its Self columns (no totals) shows its self times instead.
    self_only = all(m.total_ns is None for m in metrics) and any(
        m.self_ns is not None for m in metrics
    )
    metrics.sort(key=lambda m: -(m.total_ns or m.avg_ns or m.self_ns or 0.0))
    # Throughput, memory, accuracy and counters are not times: a value column in their unit.
    values = any(not m.is_time for m in metrics)
    columns = ["name", "device", "calls", "self" if self_only else "total", "avg", "bytes"]
    rows = []
    for metric in metrics[:top]:
        name = f"{metric.scope} ▸ {metric.name}" if metric.scope else metric.name
        time = metric.self_ns if self_only else metric.total_ns
        rows.append(
            [
                name,
                metric.device.value,
                "" if metric.calls is None else f"{metric.calls:,}",
                "" if time is None else format_ns(time),
                "" if metric.avg_ns is None else format_ns(metric.avg_ns),
                "" if metric.bytes is None else f"{metric.bytes:,.0f}",
                *([_value(metric)] if values else []),
            ]
        )
    return [*columns, "value"] if values else columns, rows


def _rich_table(title: str, columns: list[str], rows: list[list[str]], caption: str) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None)
    for column in columns:
        table.add_column(
            column,
            justify="left" if column == "name" else "right",
            overflow="fold" if column == "name" else "ellipsis",
        )
    for row in rows:
        table.add_row(*row)
    if caption:
        table.caption = caption
    _console.console.print(table, markup=False)


def _plain_table(title: str, columns: list[str], rows: list[list[str]], caption: str) -> str:
    """The Rich table's layout without Rich: a space either side of every cell, the name
    column left-aligned and whole, the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(columns, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        first = f" {cells[0]:<{widths[0]}} "
        rest = "".join(f" {c:>{w}} " for c, w in zip(cells[1:], widths[1:], strict=True))
        return (first + rest).rstrip()

    lines = [title, line(columns), *(line(row) for row in rows)]
    return "\n".join([*lines, caption] if caption else lines)


def _value(metric: Metric) -> str:
    """A metric that is not a time: its value (the mean of its samples) in its unit."""
    from perfci.core.units import format_value
    from perfci.usecases.submit.parse import metric_value

    if metric.is_time:
        return ""
    value = metric_value(metric)
    return "" if value is None else format_value(value, metric.unit)


def parse_command(
    files: list[Path] = typer.Argument(
        ..., help="Profile files, or folders of them, to read.", show_default=False
    ),
    format: opts.ProfileFormat = None,
    option: opts.ParserOptions = None,
    as_json: bool = typer.Option(False, "--json", help="Print the perfci JSON document."),
    top: int = typer.Option(15, "--top", help="Rows shown per metric kind.", min=1),
) -> None:
    """Parse profiler output into metrics: a table per profile, or JSON."""
    from perfci.usecases.submit import parse

    options = opts.key_value_pairs(option, option="--option")
    skipped: list[Path] = []
    profiles = parse.parse_profiles(files, format=format, options=options, skipped=skipped)
    opts.warn_skipped(skipped)
    for profile in profiles:
        for warning in profile.warnings:
            _console.err_console.print(f"warning: {profile.source}: {warning}")
    if as_json:
        typer.echo(json.dumps(parse.profiles_document(profiles), indent=1))
        return
    for profile in profiles:
        _show(profile, top)


def register(app: typer.Typer) -> None:
    app.command("parse")(parse_command)
