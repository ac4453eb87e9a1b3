"""``perfci parse``: read profiles and show their metrics, or print the perfci JSON document."""

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
    from rich.markup import escape
    from rich.table import Table

    from perfci.core.units import format_ns

    steps = f", {profile.steps} steps" if profile.steps is not None else ""
    _console.console.print(
        f"[bold]{escape(profile.label)}[/] ({profile.format}, "
        f"{len(profile.metrics)} metrics{steps}) — {escape(profile.source)}",
        markup=True,
    )
    kinds: dict[str, list[Metric]] = {}
    for metric in profile.metrics:
        kinds.setdefault(metric.kind.value, []).append(metric)
    for kind, metrics in kinds.items():
        # A table printed with only its Self columns (no totals) shows its self times instead.
        self_only = all(m.total_ns is None for m in metrics) and any(
            m.self_ns is not None for m in metrics
        )
        metrics.sort(key=lambda m: -(m.total_ns or m.avg_ns or m.self_ns or 0.0))
        table = Table(title=f"{kind} ({len(metrics)})", title_justify="left", box=None)
        # Throughput, memory, accuracy and counters are not times: a value column in their unit.
        values = any(not m.is_time for m in metrics)
        columns = ["name", "device", "calls", "self" if self_only else "total", "avg", "bytes"]
        for column in [*columns, "value"] if values else columns:
            table.add_column(
                column,
                justify="left" if column == "name" else "right",
                overflow="fold" if column == "name" else "ellipsis",
            )
        for metric in metrics[:top]:
            name = f"{metric.scope} ▸ {metric.name}" if metric.scope else metric.name
            time = metric.self_ns if self_only else metric.total_ns
            table.add_row(
                name,
                metric.device.value,
                "" if metric.calls is None else f"{metric.calls:,}",
                "" if time is None else format_ns(time),
                "" if metric.avg_ns is None else format_ns(metric.avg_ns),
                "" if metric.bytes is None else f"{metric.bytes:,.0f}",
                *([_value(metric)] if values else []),
            )
        if len(metrics) > top:
            table.caption = f"… {len(metrics) - top} more (use --top or --json)"
        _console.console.print(table, markup=False)
    _console.console.print()


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
