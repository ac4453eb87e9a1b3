"""``perfci alerts``: list the change-point alerts of the weekly reports, acknowledge or dismiss.

Alerts are created by ``perfci report``; a dismissed alert stays dismissed when a later report
finds the same change point again.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:  # the store and use cases load only when a command runs (CLI cold start)
    from perfci.core.weekly import AlertInfo

#: perfci.usecases.browse.alerts.STATUSES, spelled out for the help text so that building the CLI
#: does #: not import the store (tests/test_cold_start.py checks that the two agree).
STATUSES = ("open", "acknowledged", "dismissed")

alerts_app = typer.Typer(
    help="List, acknowledge and dismiss change-point alerts.", no_args_is_help=True
)


@alerts_app.command("list")
def list_command(
    status: str | None = typer.Option(
        None, "--status", help=f"Only alerts in this status: {', '.join(STATUSES)}."
    ),
    project: opts.StoredProject = None,
    benchmark: str | None = typer.Option(None, "--benchmark", "-b", help="Only this benchmark."),
    as_json: bool = typer.Option(False, "--json", help="Print the alerts as JSON."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """List alerts, newest first."""
    from perfci.usecases.browse.alerts import list_alerts
    from perfci.usecases.stores import project_or_default, session_for

    with session_for(database_url) as session:
        found = list_alerts(
            session, project=project_or_default(project), status=status, benchmark=benchmark
        )
    if as_json:
        typer.echo(json.dumps([_plain(a) for a in found], indent=1, ensure_ascii=False))
        return
    if not found:
        typer.echo("no alerts")
        return
    for alert in found:
        typer.echo(_line(alert))


def _status_command(status: str, verb: str) -> None:
    def command(
        alert_id: int = typer.Argument(..., help="The alert's id (see `perfci alerts list`)."),
        note: str | None = typer.Option(None, "--note", help="Why; shown with the alert."),
        database_url: opts.DatabaseUrl = None,
    ) -> None:
        from perfci.report import formatting as fmt
        from perfci.usecases.browse.alerts import set_alert_status
        from perfci.usecases.stores import session_for

        with session_for(database_url) as session:
            alert = set_alert_status(session, alert_id, status, note)
        typer.echo(
            f"alert {alert.id} ({alert.benchmark}, {fmt.pct(alert.change)} at "
            f"{fmt.short_sha(alert.commit)}) is {alert.status}"
        )

    command.__doc__ = f"{verb} an alert."
    alerts_app.command(verb.lower())(command)


_status_command("acknowledged", "Ack")
_status_command("dismissed", "Dismiss")
_status_command("open", "Reopen")


def _line(a: AlertInfo) -> str:
    """One alert per line (grep-friendly): id, status, benchmark, change, commits, series."""
    from perfci.report import formatting as fmt

    p_value = "p<0.001" if a.p_value < 0.001 else f"p={a.p_value:.3f}"
    note = f"  ({a.note})" if a.note else ""
    return (
        f"#{a.id}  {a.status:<12}  {a.benchmark}  {fmt.pct(a.change)}  "
        f"{fmt.short_sha(a.previous_commit)}..{fmt.short_sha(a.commit)}  {p_value}  "
        f"{a.series}{note}"
    )


def _plain(alert: AlertInfo) -> dict[str, object]:
    data = dataclasses.asdict(alert)
    data["created_at"] = alert.created_at.isoformat()
    data["updated_at"] = alert.updated_at.isoformat()
    return data


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")
