"""Entry point: builds the Typer app from the subcommand modules and maps errors to exit codes.

Exit codes: 0 success / no regression, 1 a gated regression, 2 usage or input error (and,
with a traceback, a bug in perfci: never 1, so that a crash is never read as a regression);
130 after Ctrl-C, 143 after SIGTERM, 129 after SIGHUP.

The commands that start the benchmark (:data:`BENCHMARK_COMMANDS`) first make the process one whose
environment never held perfci's secrets
(:func:`perfci.usecases.check.isolation.isolate_from_secrets`: it may re-execute itself), and run
with SIGTERM and SIGHUP raised as exceptions so that their cleanup runs
(:mod:`perfci.cli._signals`).
"""

from __future__ import annotations

import signal
import sys
import traceback
from typing import Any

import typer

from perfci import __version__
from perfci.cli import (
    alerts_cmd,
    check_cmd,
    compare_cmd,
    db_cmd,
    formats_cmd,
    import_cmd,
    ingest_cmd,
    parse_cmd,
    project_cmd,
    publish_cmd,
    report_cmd,
    run_cmd,
    runs_cmd,
    serve_cmd,
    token_cmd,
)
from perfci.cli._console import err_console, show_progress, use_log_width_for_help
from perfci.cli._signals import Terminated, raising_on_termination
from perfci.core.errors import PerfciError

#: The base of the usage errors typer raises. typer vendors its own copy of click (so
#: ``click.ClickException`` does not catch them) and exports only part of it: the base is found
#: from the public ``typer.BadParameter`` rather than imported from typer's private package.
ClickException: type[Exception] = next(
    base for base in typer.BadParameter.__mro__ if base.__name__ == "ClickException"
)

app = typer.Typer(
    name="perfci",
    help="Catch GPU performance regressions in CI: parse profiles, store runs, compare, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Each subcommand module exposes register(app).
for _module in (
    parse_cmd,
    formats_cmd,
    run_cmd,
    ingest_cmd,
    import_cmd,
    db_cmd,
    compare_cmd,
    check_cmd,
    report_cmd,
    alerts_cmd,
    publish_cmd,
    serve_cmd,
    token_cmd,
    project_cmd,
    runs_cmd,
):
    _module.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"perfci {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """perfci: automated performance-regression checks for GPU workloads."""


#: The subcommands that start the benchmark: isolated from the secrets, and SIGTERM cleans up.
BENCHMARK_COMMANDS = ("check", "run")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising SystemExit when called in-process.

    Called as the program (``argv`` is ``None``), a benchmark command first isolates the
    secrets (module docstring): this may re-execute the process, which then starts over.
    """
    args = argv if argv is not None else sys.argv[1:]
    runs_benchmark = bool(args) and args[0] in BENCHMARK_COMMANDS
    if argv is None and runs_benchmark:
        from perfci.usecases.check.isolation import isolate_from_secrets  # lazy: --help stays light

        isolate_from_secrets()
    use_log_width_for_help()
    show_progress("perfci.history")
    with raising_on_termination(runs_benchmark) as stop:
        code = _run(args)
    if stop.exit_code is not None:  # typer turns the exception into a plain 130
        err_console.print(f"stopped by {signal.Signals(stop.signum or 0).name}", markup=False)
        return stop.exit_code
    return code


def _command() -> Any:
    """The app as a click command, its plain flags shown without a type in ``--help``.

    Typer labels every option with its type, a plain flag (``--ab``, ``--json``, ``--help``)
    too: ``<bool>`` reads as if it took a value (issue 36). An empty metavar shows nothing
    there, and a flag takes no value for it to name.
    """
    command = typer.main.get_command(app)
    pending, every = [command], []
    while pending:  # groups (perfci db, perfci project) hold commands of their own
        sub = pending.pop()
        every.append(sub)
        pending.extend(getattr(sub, "commands", {}).values())
    for sub in every:
        for param in sub.params:
            if getattr(param, "is_flag", False):
                param.metavar = ""
        # --help is made anew on each call: its maker is wrapped on this command object.
        sub.get_help_option = _untyped(sub.get_help_option)  # type: ignore[method-assign]
    return command


def _untyped(make: Any) -> Any:
    def help_option(ctx: Any) -> Any:
        option = make(ctx)
        if option is not None:
            option.metavar = ""
        return option

    return help_option


def _run(args: list[str]) -> int:
    try:
        result = _command()(args=args, standalone_mode=False)
    except PerfciError as exc:
        # Messages carry benchmark output and kernel names: "[rank0]" is not Rich markup.
        err_console.print(
            "error:", str(exc), style="bold red", markup=False, highlight=False, soft_wrap=True
        )
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err_console.print("aborted")
        return 130
    except ClickException as exc:
        exc.show()  # type: ignore[attr-defined]
        return 2
    except KeyboardInterrupt as exc:
        if not isinstance(exc, Terminated):  # main() says which signal stopped it
            err_console.print("interrupted", markup=False)
        return 130
    except Exception:  # noqa: BLE001 - a bug: show it, but never exit 1 ("regression")
        traceback.print_exc()
        err_console.print(
            "internal error in perfci (the traceback above is a bug: please report it)",
            markup=False,
        )
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
