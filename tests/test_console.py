"""pairrepro.console: the output state, log records through rich, progress off a terminal."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pairrepro import console as output


@pytest.fixture(autouse=True)
def _restore_state() -> Iterator[None]:
    yield
    output.configure(quiet=False, json=False)


def test_log_records_reach_stderr_and_quiet_keeps_only_warnings(
        capsys: pytest.CaptureFixture[str]) -> None:
    log = logging.getLogger("pairrepro.data.fetch")
    output.configure(quiet=False, json=False)
    log.info("fetched trecqa")
    captured = capsys.readouterr()
    assert "fetched trecqa" in captured.err and captured.out == ""
    for flags in ({"quiet": True}, {"json": True}):
        output.configure(**flags)
        log.info("hidden detail")
        log.warning("checksum unknown")
        err = capsys.readouterr().err
        assert "hidden detail" not in err and "checksum unknown" in err


def test_configure_twice_prints_a_record_once(capsys: pytest.CaptureFixture[str]) -> None:
    output.configure()
    output.configure()
    logging.getLogger("pairrepro.train").warning("once")
    assert capsys.readouterr().err.count("once") == 1


def test_off_a_terminal_nothing_is_cut(capsys: pytest.CaptureFixture[str]) -> None:
    number = "0." + "1234567890" * 20  # far wider than any terminal's default of 80
    output.get_console().print(number)
    assert number in capsys.readouterr().out


def test_step_progress_off_a_terminal_prints_plain_lines(
        capsys: pytest.CaptureFixture[str]) -> None:
    progress = output.step_progress(enabled=True, unit="steps")
    assert isinstance(progress, output.PlainProgress)
    with progress:
        task = progress.add_task("preflight x", total=2, loss="-")
        progress.update(task, completed=2, loss="0.5")
    assert "preflight x: 2/2 steps (100%), loss 0.5" in capsys.readouterr().err
    silent = output.step_progress(enabled=False)
    with silent:
        silent.update(silent.add_task("x", total=1), completed=1)
    assert capsys.readouterr().err == ""


def test_the_cli_flags_set_the_one_output_state() -> None:
    from typer.testing import CliRunner

    from pairrepro.cli import common
    from pairrepro.cli.app import app

    result = CliRunner().invoke(app, ["datasets", "--json"])
    assert result.exit_code == 0, result.output
    assert output.STATE.json and not output.STATE.quiet
    assert common.STATE is output.STATE  # the commands read the state the flags set
