"""Ctrl-C in a ``pairrepro`` process started by :func:`pairrepro.cli.main`: before the command
runs it exits 130 at once (nothing is written yet); while it runs it is ``KeyboardInterrupt``;
once it has ended it is ignored, so an outcome is never followed by exit 130. Elsewhere (a test
calling the app) Ctrl-C is left to its owner. Imports nothing heavy: it runs first."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

from pairrepro.errors import INTERRUPTED_EXIT

_OWNER = {"main": False}


def _before_command(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # once: the exit is not interrupted again
    sys.stderr.write("interrupted\n")
    raise SystemExit(INTERRUPTED_EXIT)


def take_over() -> None:
    """This process is the ``pairrepro`` command: the phases apply, starting with the first."""
    _OWNER["main"] = True
    signal.signal(signal.SIGINT, _before_command)


def command_started() -> None:
    """From here on Ctrl-C is ``KeyboardInterrupt``, for the command to handle."""
    if _OWNER["main"]:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def command_ended() -> None:
    """The command's outcome (output, exit code) stands: Ctrl-C is ignored from here on."""
    if _OWNER["main"]:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def interrupts_held() -> Iterator[Callable[[], None]]:
    """Ctrl-C held until the block calls the check it is given (between steps that each
    complete or do not start), which raises ``KeyboardInterrupt`` if Ctrl-C was pressed since
    the block began; one pressed during the last step is dropped. A block that ends its
    command calls :func:`command_ended` last, and Ctrl-C stays ignored after it: put back, the
    handler would undo an outcome already printed."""
    pressed: list[int] = []

    def check() -> None:
        if pressed:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield check
    finally:
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)
