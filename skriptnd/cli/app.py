"""The `sknd` command line: the typer app, its commands (one module each) and the console entry point.

Exit codes: 0 ok, 1 diagnostics found, 2 usage error, 3 internal error.

The commands are registered in `COMMANDS`, name -> module, and a command's module is imported only when
that command runs (or shows its help): together they import nearly all of skriptnd, numpy and the
backends, about ten times what `sknd --help` needs. This table is the one place the CLI imports lazily;
each command module imports what it uses at its top. Every command module defines `command`, the typer
function, and imports no other command module (shared pieces: options, io, inputs, backend, loading, report).
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Annotated

import typer
from typer import _click as click  # typer vendors click (0.29+); these are the types its groups hand us
from typer.core import TyperCommand
from typer.main import get_command_from_info
from typer.models import CommandInfo

from skriptnd.cli.help import TidyGroup, tidy
from skriptnd.deepstack import Terminated, call_with_deep_stack
from skriptnd.version import __version__


@dataclass(frozen=True)
class Entry:
    """A command: the module defining its `command` function, and the line `sknd --help` lists it with
    (the first line of the function's docstring; tests/test_cli_app.py keeps the two equal)."""
    module: str
    summary: str


#: The commands in the order `sknd --help` lists them.
COMMANDS: dict[str, Entry] = {
    "check": Entry("skriptnd.cli.check", "Check SkriptND modules and report every problem found (graphs are "
                   "composed for their defaults)."),
    "fmt": Entry("skriptnd.cli.fmt", "Format SkriptND modules in place (comments are kept)."),
    "doc": Entry("skriptnd.cli.doc", "Print the operator reference of the standard library (as in "
                 "docs/stdlib.md)."),
    "lsp": Entry("skriptnd.cli.lsp", "Run the SkriptND language server over stdin/stdout (for editors)."),
    "compose": Entry("skriptnd.cli.compose", "Compose a model's graph and print it."),
    "run": Entry("skriptnd.cli.run", "Run a model's graph on inputs and write or show its outputs."),
    "bench": Entry("skriptnd.cli.bench", "Time a model on several backends (median latency, ratio to "
                   "onnxruntime)."),
    "export": Entry("skriptnd.cli.export", "Export a model's graph to TOSA 1.0 (MLIR and/or flatbuffer) or ONNX."),
    "compare": Entry("skriptnd.cli.compare", "Compare backends operation by operation and name the first "
                     "operation that diverges."),
    "stats": Entry("skriptnd.cli.stats", "Count a model's parameters, MACs and peak activation memory."),
    "quantize": Entry("skriptnd.cli.quantize", "Quantize a float model to int8 with calibration data "
                      "(post-training, static)."),
    "import": Entry("skriptnd.cli.importing", "Import an ONNX, TFLite or NNEF 1.x model as a SkriptND model folder."),
    "version": Entry("skriptnd.cli.version", "Print the skriptnd version (as sknd --version does)."),
}

#: ctx.meta key set while the group's own help is written: the commands are listed from the table then.
_LISTING = "skriptnd.cli.listing"


class Commands(TidyGroup):
    """The `sknd` group: its commands come from `COMMANDS`, each module imported when its command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if ctx.meta.get(_LISTING):  # `sknd --help`: the name and summary, nothing imported
            return TyperCommand(cmd_name, help=entry.summary)
        built = self.commands.get(cmd_name)
        if built is None:
            module = importlib.import_module(entry.module)
            built = get_command_from_info(CommandInfo(name=cmd_name, callback=module.command),
                                          pretty_exceptions_short=app.pretty_exceptions_short,
                                          rich_markup_mode=app.rich_markup_mode)
            self.commands[cmd_name] = built
        tidy(built, ctx)
        return built

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta[_LISTING] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            del ctx.meta[_LISTING]


app = typer.Typer(
    cls=Commands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="SkriptND (NNEF 2.0) toolchain: check, format, compose, run and export models.\n\n"
    "Example: sknd run models/digits --input image=models/digits/samples/3.npy",
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"skriptnd {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                                help="Print the skriptnd version and exit.")] = False) -> None:
    """Options of `sknd` itself (its help text is the Typer app's `help` above)."""


def _ignore_late_signals() -> None:
    """The command is done (its files written or refused): a Ctrl-C or SIGTERM while the interpreter shuts down
    (joining threads, freeing) would otherwise kill it by the signal (status -2), as if the work were lost."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main() -> None:
    """Console entry point: usage errors exit 2 (click), internal errors 3 without a traceback."""

    def terminate(_signum: int, _frame: object) -> None:
        raise Terminated

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminate)
    try:
        call_with_deep_stack(app)
    except SystemExit:
        _ignore_late_signals()
        raise
    except KeyboardInterrupt:
        _ignore_late_signals()
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Terminated:
        _ignore_late_signals()
        sys.stderr.write("terminated\n")
        sys.exit(143)
    except RecursionError:
        sys.stderr.write("error: input nested too deeply to process\n")
        sys.exit(1)
    except Exception as err:  # a bug in skriptnd, not in the user's input
        sys.stderr.write(f"internal error: {type(err).__name__}: {err}\n"
                         "this is a bug in skriptnd; please report it with the input that caused it\n")
        sys.exit(3)


if __name__ == "__main__":
    main()
