"""``perfci db``: create, migrate and inspect the store's schema (Alembic under the hood), and
keep a large store in shape: ``prune`` (retention), ``maintain`` (the periodic job),
``partitions`` (issue 17) and ``arrays`` (issue 35; docs/operations.md)."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:
    from perfci.usecases.admin.prune import PruneReport

# Alembic, SQLAlchemy and pydantic load inside the commands: `perfci --help` stays fast.

db_app = typer.Typer(
    help="Create, migrate and inspect the perfci database schema.", no_args_is_help=True
)


@db_app.command("upgrade")
def upgrade_command(
    revision: str = typer.Argument("head", help="Target revision."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Migrate the schema up to REVISION (default: the newest)."""
    from perfci.usecases.admin.db import upgrade_schema

    state = upgrade_schema(database_url, revision)
    typer.echo(f"{state.url}: schema at revision {state.found or 'base (empty)'}")
    if state.partitions_made:
        typer.echo(f"made sample partitions for {', '.join(state.partitions_made)}")


@db_app.command("downgrade")
def downgrade_command(
    revision: str = typer.Argument(..., help="Target revision; `base` removes every table."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Migrate the schema down to REVISION. Data in removed tables is lost."""
    from perfci.usecases.admin.db import downgrade_schema

    state = downgrade_schema(database_url, revision)
    typer.echo(f"{state.url}: schema at revision {state.found or 'base (empty)'}")


@db_app.command("current")
def current_command(database_url: opts.DatabaseUrl = None) -> None:
    """Show the schema revision of the database and whether it is up to date."""
    from perfci.usecases.admin.db import schema_state

    state = schema_state(database_url)
    if state.found is None:
        described = "no perfci schema (run `perfci db upgrade`)"
    elif state.found == state.head:
        described = f"{state.found} (head)"
    else:
        described = f"{state.found} (head is {state.head}: run `perfci db upgrade`)"
    typer.echo(f"{state.url}: {described}")


Keep = Annotated[
    str | None,
    typer.Option(
        "--keep",
        help="Keep raw per-repeat samples this long: 90d, 12w or days (default: the "
        "keep_samples setting). Older runs keep one summary per series.",
    ),
]
KeepBase = Annotated[
    str | None,
    typer.Option(
        "--keep-base",
        help="Keep base-branch runs' raw samples this long (default: keep_base_samples, "
        "else --keep). Base branches: the base_branches setting (patterns, e.g. main, "
        "release/*) and every branch a pull request targets.",
    ),
]


@db_app.command("prune")
def prune_command(
    keep: Keep = None,
    keep_base: KeepBase = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be pruned; change nothing.")
    ] = False,
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Roll old runs' raw samples up into one summary per run and series (median, spread,
    count), a whole month at a time; charts, change points and weekly reports keep working."""
    from perfci.usecases.admin.prune import prune_store

    _print_prune(prune_store(database_url, keep=keep, keep_base=keep_base, dry_run=dry_run))


@db_app.command("maintain")
def maintain_command(
    ahead: Annotated[
        int | None,
        typer.Option("--ahead", help="Months of partitions to make ahead (default: 3)."),
    ] = None,
    database_url: opts.DatabaseUrl = None,
) -> None:
    """The periodic job: make the coming months' sample partitions, and prune when
    keep_samples is set; says when runs lack arrays (perfci db arrays). Run it daily (cron);
    it is safe to run any time."""
    from perfci.usecases.admin.prune import maintain_store

    report = maintain_store(database_url, ahead=ahead)
    made = ", ".join(str(month) for month in report.created) or "none needed"
    typer.echo(f"{report.url}: partitions made: {made}")
    for note in report.notes:
        typer.echo(note)
    if report.prune is not None:
        _print_prune(report.prune)


@db_app.command("arrays")
def arrays_command(
    batch: Annotated[
        int, typer.Option("--batch", min=1, help="Runs per transaction (default: 100).")
    ] = 100,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count the runs without arrays; write nothing.")
    ] = False,
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Keep the values of runs stored without them (by `perfci ingest`, `perfci import`, or
    before revision 0010) as the arrays comparisons read of a baseline run in one piece.
    Safe beside uploads, prunes and deletes; running it again goes on where it stopped."""
    from perfci.usecases.admin.arrays import keep_missing_arrays

    shown = [0]

    def progress(done: int, missing: int) -> None:
        # About every tenth of the way: a year of runs is hundreds of batches.
        step = max(missing // 10, 1)
        if done // step > shown[0] or done >= missing:
            shown[0] = done // step
            typer.echo(f"  {min(done, missing):,} / {missing:,} runs")

    report = keep_missing_arrays(database_url, batch=batch, dry_run=dry_run, progress=progress)
    if report.dry_run:
        typer.echo(f"{report.url}: {_runs(report.missing)} without arrays (dry run: none written)")
        return
    typer.echo(f"{report.url}: kept the arrays of {_runs(report.kept)}")
    if report.left_out:
        typer.echo(
            f"{_runs(report.left_out)} left without: a stored value that is not a finite, "
            "non-negative number (`perfci runs delete` removes such a run), or pruned or "
            "deleted meanwhile"
        )


@db_app.command("partitions")
def partitions_command(database_url: opts.DatabaseUrl = None) -> None:
    """List the monthly partitions of the samples table with their sizes (PostgreSQL)."""
    from perfci.usecases.admin.prune import partitions_of

    found = partitions_of(database_url)
    if not found:
        typer.echo("no partitions (SQLite, or a schema older than revision 0006)")
        return
    typer.echo(f"{'partition':<18} {'month':<8} {'rows (est.)':>14} {'size':>10}")
    for p in found:
        rows = "-" if p.rows is None else f"{p.rows:,}"
        typer.echo(f"{p.name:<18} {p.month or '-'!s:<8} {rows:>14} {_size(p.bytes):>10}")
    typer.echo(f"{len(found)} partitions, {_size(sum(p.bytes for p in found))}")


def _print_prune(report: PruneReport) -> None:
    base = f", base-branch runs {report.keep_base_days} days" if report.keep_base_days else ""
    would = "would prune" if report.dry_run else "pruned"
    typer.echo(
        f"{report.url}: raw samples kept {report.keep_days} days{base} "
        f"(runs stored before {report.cutoff:%Y-%m-%d} are rolled up)"
    )
    if report.keep_base_days:
        typer.echo(
            f"base branches: {', '.join(report.base_branches)} (the base_branches setting), "
            "and every branch a pull request targets"
        )
    if not report.months:
        typer.echo("nothing to prune")
    for m in report.months:
        sizes = ""
        if m.bytes_before is not None:
            left = "?" if m.bytes_after is None else _size(m.bytes_after)
            sizes = f", partition {_size(m.bytes_before)} -> {left}"
        kept = f", {m.kept_runs:,} base-branch runs kept whole" if m.kept_runs else ""
        typer.echo(
            f"  {m.month}: {m.action}; {m.runs:,} runs{kept}, {m.samples:,} samples"
            f" -> {m.summaries:,} summaries{sizes}"
        )
    before, after = report.bytes_before, report.bytes_after
    typer.echo(
        f"{would}: samples {_size(before[0])} -> {_size(after[0])}, summaries "
        f"{_size(before[1])} -> {_size(after[1])}; freed {_size(report.freed)}"
    )


def _runs(n: int) -> str:
    return f"{n:,} run{'s' * (n != 1)}"


def _size(n: int) -> str:
    size, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):  # noqa: B007 - the last one is kept
        if abs(size) < 1000:
            break
        size /= 1000
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
