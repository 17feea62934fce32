"""The `sknd` command line. Exit codes: 0 ok, 1 diagnostics found, 2 usage error, 3 internal error."""

from __future__ import annotations

import signal
import sys
import threading
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from skriptnd.cli import bench as cli_bench
from skriptnd.cli import graph as cli_graph
from skriptnd.cli.export import export_command
from skriptnd.cli.help import TidyGroup
from skriptnd.cli.importing import import_command
from skriptnd.diagnostics import Diagnostic, print_diagnostics, render_json, render_summary
from skriptnd.fileio import read_source
from skriptnd.source import SourceFile
from skriptnd.version import __version__

app = typer.Typer(
    cls=TidyGroup,
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


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


class Color(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


def _color(choice: Color) -> bool | None:
    return {Color.auto: None, Color.always: True, Color.never: False}[choice]


def _report(diags: list[Diagnostic], sources: dict[str, SourceFile], fmt: OutputFormat, color: Color,
            files: int) -> None:
    ordered = sorted(diags, key=lambda d: (d.span.file, d.span.line, d.span.col))
    if fmt is OutputFormat.json:
        sys.stdout.write(render_json(ordered) + "\n")
        return
    if ordered:
        print_diagnostics(ordered, sources, color=_color(color))
    noun = "file" if files == 1 else "files"
    typer.echo(render_summary(ordered) + (f" in {files} {noun}" if files else ""), err=True)


PathsArg = Annotated[list[str], typer.Argument(help="SkriptND files or model folders (with main.sknd).")]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", help="Diagnostics as text or LSP-shaped JSON.")]
ColorOpt = Annotated[Color, typer.Option("--color", help="Colour the text output.")]


@app.command()
def check(paths: Annotated[list[str] | None, typer.Argument(
              help="SkriptND files, model folders (with main.sknd) or folders of modules; default: '.'")] = None,
          format: FormatOpt = OutputFormat.text, color: ColorOpt = Color.auto,
          strict: Annotated[bool, typer.Option("--strict", help="Also warn about assertions that hold only under "
                                               "a condition on graph attributes; warnings fail the check.")] = False,
          verbose: Annotated[bool, typer.Option("--verbose", help="Also note assertions that depend on dynamic "
                                                "extents.")] = False) -> None:
    """Check SkriptND modules and report every problem found (graphs are composed for their defaults).

    Example: sknd check models/digits   (or: sknd check --format json my.sknd)"""
    from skriptnd.check.program import check_paths, shown

    result = check_paths(paths or [])
    diags = shown(result.diagnostics, strict=strict, verbose=verbose)
    _report(diags, result.sources, format, color, result.files)
    failing = ("error", "warning") if strict else ("error",)
    raise typer.Exit(1 if any(d.severity in failing for d in diags) else 0)


@app.command()
def fmt(
    paths: PathsArg,
    check_only: Annotated[bool, typer.Option("--check", help="Only report files that would change.")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the formatted text instead of rewriting.")] = False,
    color: ColorOpt = Color.auto,
) -> None:
    """Format SkriptND modules in place (comments are kept).

    Example: sknd fmt --check models/digits/main.sknd"""
    from skriptnd.check.program import expand_paths
    from skriptnd.syntax import parse_module
    from skriptnd.syntax.printer import format_module

    files, diags = expand_paths(paths)
    sources: dict[str, SourceFile] = {}
    changed: list[str] = []
    for path in dict.fromkeys(files):
        source, read_diags = read_source(path)
        diags.extend(read_diags)
        if source is None:
            continue
        sources[source.path] = source
        module, syntax = parse_module(source.text, source.path)
        if syntax or module is None:
            diags.extend(syntax)
            continue
        formatted = format_module(module)
        if stdout:
            sys.stdout.write(formatted)
        elif formatted != source.text:
            changed.append(source.path)
            if not check_only:
                from skriptnd.cli.io import write_output

                write_output(Path(source.path), formatted, "PATHS")
    if diags:
        print_diagnostics(diags, sources, color=_color(color))
    for name in changed:
        typer.echo(f"{'would reformat' if check_only else 'reformatted'} {name}", err=True)
    failed = bool(diags) or (check_only and bool(changed))
    raise typer.Exit(1 if failed else 0)


@app.command()
def doc(
    target: Annotated[str | None, typer.Argument(help="A standard module (nn) or operator (nn.conv); all if omitted.")]
    = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the Markdown to this file.")] = None,
    raw: Annotated[bool, typer.Option("--markdown", help="Print Markdown source even on a terminal.")] = False,
) -> None:
    """Print the operator reference of the standard library (as in docs/stdlib.md).

    Example: sknd doc nn.conv   (or: sknd doc -o stdlib.md)"""
    from skriptnd.cli.io import check_output_file, write_output
    from skriptnd.semantics.docgen import render_target

    check_output_file(output, "--output")
    try:
        text = render_target(target)
    except LookupError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if output is not None:
        write_output(output, text, "--output")
        typer.echo(f"wrote {output}", err=True)
        return
    if raw or not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(text))


@app.command()
def lsp() -> None:
    """Run the SkriptND language server over stdin/stdout (for editors).

    Example: configure your editor's LSP client to start the command: sknd lsp"""
    from skriptnd.lsp.server import main as serve

    serve()


app.command("compose")(cli_graph.compose_command)
app.command("run")(cli_graph.run_command)
app.command("bench")(cli_bench.bench_command)
app.command("export")(export_command)
app.command("import")(import_command)


@app.command()
def version() -> None:
    """Print the skriptnd version (as sknd --version does).

    Example: sknd version"""
    typer.echo(__version__)


def main() -> None:
    """Console entry point: usage errors exit 2 (click), internal errors 3 without a traceback."""
    from skriptnd.deepstack import Terminated, call_with_deep_stack

    def terminate(_signum: int, _frame: object) -> None:
        raise Terminated

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminate)
    try:
        call_with_deep_stack(app)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Terminated:
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
