"""Entry point: builds the Typer app from the subcommand modules and maps errors to exit codes.

Exit codes: 0 success / no regression, 1 a gated regression, 2 usage or input error (and,
with a traceback, a bug in perfci: never 1, so that a crash is never read as a regression);
130 after Ctrl-C, 143 after SIGTERM, 129 after SIGHUP.

The commands that start the benchmark (:data:`BENCHMARK_COMMANDS`) first make the process one whose
environment never held perfci's secrets
(:func:`perfci.usecases.check.isolation.isolate_from_secrets`: it may re-execute itself), and run
with SIGTERM and SIGHUP raised as exceptions so that their cleanup runs
(:mod:`perfci.cli._signals`).

Starting is quick (issue 33): building the app imports the command modules, which import
their use cases, Rich and the formats' readers only inside the commands, and Typer's Rich help
(``typer.rich_utils``) is imported only when help is printed (:class:`_HelpCommand`).
``tests/test_cold_start.py`` guards what ``--help``, ``formats`` and ``parse`` import;
``benchmarks/cold_start.py`` times them.
"""

from __future__ import annotations

import signal
import sys
import traceback
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from perfci import __version__
from perfci.cli import _console
from perfci.cli._coercion import lean_coercion
from perfci.cli._commands import LazyCommands
from perfci.cli._console import plain_help_width, show_progress, use_log_width_for_help
from perfci.cli._signals import Terminated, raising_on_termination
from perfci.core.errors import PerfciError

#: The base of the usage errors typer raises. typer vendors its own copy of click (so
#: ``click.ClickException`` does not catch them) and exports only part of it: the base is found
#: from the public ``typer.BadParameter`` rather than imported from typer's private package.
ClickException: type[Exception] = next(
    base for base in typer.BadParameter.__mro__ if base.__name__ == "ClickException"
)


def _unset_flag_is_false(option: Any) -> Any:
    """The ``--help`` flag, not given, reads as ``False`` rather than ``None``.

    Typer coerces a parameter whose value is not already a ``bool`` through a pydantic
    ``TypeAdapter``, and so imports pydantic (0.1-0.4 s) on every command for the help flag
    alone, whose unset value its copy of click leaves at ``None``. A flag not given is false.
    """
    if option is not None and getattr(option, "default", False) is None:
        option.default = False
    return option


def _format_help(command: Any, ctx: Any, formatter: Any, rich_help: Any) -> None:
    """Help on a terminal is Typer's Rich help; in a pipe (a CI log, ``| less``) it is plain
    text as wide as the log (:mod:`perfci.cli._console`): the same words without the box
    drawing, and without importing Rich, Markdown and Pygments for it (issue 33)."""
    width = plain_help_width()
    if width is None:
        use_log_width_for_help()  # imports Typer's Rich help: only when help is printed
        rich_help(ctx, formatter)
        return
    formatter.width = width
    # Typer prints its Rich help unless the markup mode is None: click's own layout then.
    mode, command.rich_markup_mode = command.rich_markup_mode, None
    try:
        rich_help(ctx, formatter)
    finally:
        command.rich_markup_mode = mode


class _HelpCommand(TyperCommand):
    """A command whose help is laid out for CI logs in a pipe (:func:`_format_help`), and that
    imports nothing for its help flag until help is asked for."""

    def format_help(self, ctx: Any, formatter: Any) -> None:  # typer's vendored click types
        _format_help(self, ctx, formatter, super().format_help)

    def get_help_option(self, ctx: Any) -> Any:
        return _unset_flag_is_false(super().get_help_option(ctx))


class _HelpGroup(TyperGroup):
    """A group whose help is laid out, and whose help flag is read, as :class:`_HelpCommand`'s."""

    def format_help(self, ctx: Any, formatter: Any) -> None:  # typer's vendored click types
        _format_help(self, ctx, formatter, super().format_help)

    def get_help_option(self, ctx: Any) -> Any:
        return _unset_flag_is_false(super().get_help_option(ctx))


def _lay_help_out_for_logs(typer_app: typer.Typer) -> None:
    """Give every command and group of ``typer_app`` the help classes above."""
    typer_app.info.cls = _HelpGroup
    for command in typer_app.registered_commands:
        command.cls = _HelpCommand
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _lay_help_out_for_logs(group.typer_instance)


#: The subcommands in the order ``perfci --help`` lists them, each with the module whose
#: ``register(app)`` defines it: imported when the command runs, or when help lists them all.
COMMANDS = {
    "parse": "perfci.cli.parse_cmd",
    "formats": "perfci.cli.formats_cmd",
    "run": "perfci.cli.run_cmd",
    "ingest": "perfci.cli.ingest_cmd",
    "import-history": "perfci.cli.import_cmd",
    "compare": "perfci.cli.compare_cmd",
    "check": "perfci.cli.check_cmd",
    "bisect": "perfci.cli.bisect_cmd",
    "report": "perfci.cli.report_cmd",
    "publish": "perfci.cli.publish_cmd",
    "answer": "perfci.cli.answer_cmd",
    "serve": "perfci.cli.serve_cmd",
    "db": "perfci.cli.db_cmd",
    "alerts": "perfci.cli.alerts_cmd",
    "token": "perfci.cli.token_cmd",
    "project": "perfci.cli.project_cmd",
    "runs": "perfci.cli.runs_cmd",
}


class _RootGroup(_HelpGroup):
    """``perfci``: its subcommands are built when looked up (:mod:`perfci.cli._commands`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(COMMANDS, _lay_help_out_for_logs, _untype_flags)


app = typer.Typer(
    name="perfci",
    help="Catch GPU performance regressions in CI: parse profiles, store runs, compare, report.",
    cls=_RootGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


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
BENCHMARK_COMMANDS = ("check", "run", "bisect")


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
    show_progress("perfci.history")  # the history branch's one-line progress, on stderr
    with raising_on_termination(runs_benchmark) as stop:
        code = _run(args)
    if stop.exit_code is not None:  # typer turns the exception into a plain 130
        _console.err_console.print(
            f"stopped by {signal.Signals(stop.signum or 0).name}", markup=False
        )
        return stop.exit_code
    return code


def _command() -> Any:
    """The app as a click command, its plain flags shown without a type in ``--help``
    (:func:`_untype_flags`; each subcommand gets the same when it is built)."""
    command = typer.main.get_command(app)
    _untype_flags(command)
    return command


def _untype_flags(command: Any) -> None:
    """Typer labels every option with its type, a plain flag (``--ab``, ``--json``, ``--help``)
    too: ``<bool>`` reads as if it took a value (issue 36). An empty metavar shows nothing
    there, and a flag takes no value for it to name. Subcommands not built yet (the root's
    :class:`LazyCommands`) get it when they are, so nothing is built for it."""
    pending = [command]
    while pending:  # groups (perfci db, perfci project) hold commands of their own
        sub = pending.pop()
        for param in sub.params:
            if getattr(param, "is_flag", False):
                param.metavar = ""
        lean_coercion(sub)  # values that need no conversion skip pydantic
        # --help is made anew on each call: its maker is wrapped on this command object.
        sub.get_help_option = _untyped(sub.get_help_option)
        commands = getattr(sub, "commands", {})
        if not isinstance(commands, LazyCommands):
            pending.extend(commands.values())


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
        _console.err_console.print(
            "error:", str(exc), style="bold red", markup=False, highlight=False, soft_wrap=True
        )
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        _console.err_console.print("aborted")
        return 130
    except ClickException as exc:
        exc.show()  # type: ignore[attr-defined]
        return 2
    except KeyboardInterrupt as exc:
        if not isinstance(exc, Terminated):  # main() says which signal stopped it
            _console.err_console.print("interrupted", markup=False)
        return 130
    except UnicodeEncodeError as exc:
        if exc.reason != "surrogates not allowed":
            return _internal_error()
        # Bytes that are not UTF-8 in an argument or an environment variable (Python decodes
        # them to lone surrogates) reach a database driver, which cannot encode them; the
        # use case's transaction is rolled back. The ingest names the field itself.
        _console.err_console.print(
            f"error: a value given to perfci is not UTF-8 text: it holds "
            f"U+{ord(exc.object[exc.start]):04X} (an argument or an environment variable "
            f"with bytes of another encoding?), which perfci cannot store or look up",
            markup=False,
            soft_wrap=True,
        )
        return 2
    except Exception:  # noqa: BLE001 - a bug: show it, but never exit 1 ("regression")
        return _internal_error()
    return result if isinstance(result, int) else 0


def _internal_error() -> int:
    traceback.print_exc()
    _console.err_console.print(
        "internal error in perfci (the traceback above is a bug: please report it)",
        markup=False,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
