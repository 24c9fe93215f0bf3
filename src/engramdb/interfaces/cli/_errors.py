"""How ``engram`` fails: every user error becomes one line on stderr and exit code 1.

Commands do not catch errors: :class:`EngramGroup`, the root command, maps them
once. A user error is an :class:`~engramdb.EngramError` (the library found it),
a usage error (the parser found it), an aborted prompt, or a file the user named
that cannot be read or written. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from engramdb.errors import EngramError

__all__ = ["EngramGroup", "report"]


class EngramGroup(TyperGroup):
    """The ``engram`` command: every user error becomes ``error: <one line>`` on stderr and exit code 1.

    Click's own convention (a usage banner plus exit code 2 for usage errors) is
    replaced because the contract promises exit code 1 and one line for any user
    error, whether the parser or the library found it.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; exit (or return the exit code when ``standalone_mode`` is false)."""
        try:
            rv = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
            # Without standalone mode the parser returns an exit code for --help / typer.Exit,
            # and the command's return value otherwise (always None for our commands).
            code = rv if isinstance(rv, int) else 0
        except typer.Exit as exc:
            code = exc.exit_code
        except typer.Abort:
            code = report("aborted")
        except typer.TyperException as exc:  # click's ClickException and UsageError derive from it
            code = report(_usage_message(exc))
        except EngramError as exc:
            code = report(str(exc))
        except BrokenPipeError:
            code = _broken_pipe()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                code = _broken_pipe()
            else:
                # A file the user named cannot be read or written: their problem to fix, not a crash.
                code = report(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            code = 130
        if not standalone_mode:
            return code
        sys.exit(code)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def report(message: str) -> int:
    """Print ``error: message`` on one line to stderr; the exit code of a user error (1)."""
    sys.stderr.write(f"error: {_one_line(message) or 'failed'}\n")
    sys.stderr.flush()
    return 1


def _usage_message(exc: typer.TyperException) -> str:
    message = _one_line(exc.format_message()).rstrip(".")
    # Click capitalises its messages ("No such option: --x"); ours are lower case.
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    command_path = getattr(ctx, "command_path", None)
    if command_path:
        message = f"{message} (see '{command_path} --help')"
    return message


def _broken_pipe() -> int:
    # The reader went away (``engram memory list | head``): stop quietly, and keep Python
    # from complaining again when it flushes stdout at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests): nothing to redirect
        pass
    finally:
        os.close(devnull)
    return 1
