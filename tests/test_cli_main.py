"""The entry point's contract: exit codes and error printing that never breaks on odd text."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfci.cli.main import main


def test_error_text_with_rich_markup_is_printed_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "[/x] [rank0] missing.txt"
    assert main(["parse", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "[/x] [rank0] missing.txt" in err and "no such file" in err


def test_usage_errors_exit_2_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert main(["check", "--no-such-option"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_bug_exits_2_never_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Exit 1 means "regression" to CI: an unexpected exception must not be read as one.
    import perfci.cli.formats_cmd as formats_cmd

    def broken() -> dict[str, object]:
        raise RuntimeError("boom")

    monkeypatch.setattr("perfci.formats.registry.formats", broken)
    assert formats_cmd is not None
    assert main(["formats"]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err and "internal error" in err


def test_every_documented_command_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (
        "parse",
        "formats",
        "run",
        "ingest",
        "db",
        "check",
        "compare",
        "report",
        "alerts",
        "publish",
        "serve",
        "token",
    ):
        assert main([command, "--help"]) == 0, command
    capsys.readouterr()


def test_every_lazily_listed_command_is_what_its_module_registers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The root group builds a subcommand from its module on lookup (issue 33): each name it
    lists must be the one its module registers, or the command would read as unknown."""
    from perfci.cli.main import COMMANDS

    for name in COMMANDS:
        assert main([name, "--help"]) == 0, name
        assert f" {name} [OPTIONS]" in capsys.readouterr().out, name  # its own usage line


def test_python_dash_m_perfci_is_the_command() -> None:
    """``python -m perfci`` runs the same CLI as the ``perfci`` script (a fresh interpreter)."""
    import sys

    from processes import run

    from perfci import __version__

    done = run([sys.executable, "-m", "perfci", "--version"], timeout_s=60)
    assert done.returncode == 0, done.stderr
    assert __version__ in done.stdout
    bad = run([sys.executable, "-m", "perfci", "no-such-command"], timeout_s=60)
    assert bad.returncode == 2
    assert "no-such-command" in bad.stderr
