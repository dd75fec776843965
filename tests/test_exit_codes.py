"""One exit-code table (``irtrace.base.errors.EXIT_CODES``): every tool's and command's ``--help``
lists exactly its rows, no command gives one code two meanings, and every error class's code is in
its tool's rows."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
from collections.abc import Iterator

import pytest

import irtrace
import irtrace.diff as passdiff
import passviz
from irtrace.base.errors import EXIT_CODES, IRTRACE, ExitCode, IrtraceError, exit_rows
from irtrace.cli.main import build_parser as irtrace_parser
from passdiff.cli import build_parser as passdiff_parser
from passviz import cli as passviz_cli
from passviz.errors import GraphvizMissingError
from tests.conftest import ROOT
from tilelang_lsp import cli as lsp_cli
from tilelang_mcp.cli import build_parser as mcp_parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name (none for a parser without them)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def lsp_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        lsp_cli.main(["--help"])
    return capsys.readouterr().out


def help_pages(capsys: pytest.CaptureFixture[str]) -> Iterator[tuple[str, str]]:
    """``(the command whose rows it must list, its --help)`` for every tool and command."""
    irtrace_top = irtrace_parser()
    yield IRTRACE, irtrace_top.format_help()
    for name, parser in subcommands(irtrace_top).items():
        own = f"irtrace {name}"
        yield (own if any(own in row.commands for row in EXIT_CODES) else IRTRACE), parser.format_help()
    passdiff_top = passdiff_parser()
    yield "passdiff", passdiff_top.format_help()
    for parser in subcommands(passdiff_top).values():
        yield "passdiff", parser.format_help()
    for make in (passviz_cli.browse_parser, passviz_cli.dot_parser, passviz_cli.html_parser):
        yield "passviz", make().format_help()
    yield "passviz", passviz_cli.layout_parser().format_help()
    yield "tilelang-mcp", mcp_parser().format_help()
    yield "tilelang-lsp", lsp_help(capsys)


def listed_rows(help_text: str) -> dict[int, str]:
    """The codes under "exit codes:" at the end of a help text, each with its meaning unwrapped."""
    table = help_text[help_text.index("exit codes:") :].splitlines()[1:]
    rows: dict[int, str] = {}
    code = -1
    for line in table:
        if match := re.match(r"^ {2,4}(\d{1,3})  (.*)$", line):
            code = int(match[1])
            assert code not in rows, f"exit {code} listed twice"
            rows[code] = match[2]
        elif line.startswith(" " * 7) and code in rows:
            rows[code] += " " + line.strip()
        else:
            break
    return rows


def test_every_help_lists_exactly_the_rows_of_its_command(capsys: pytest.CaptureFixture[str]) -> None:
    pages = list(help_pages(capsys))
    assert len(pages) > 20  # every irtrace and passdiff subcommand was found
    for command, help_text in pages:
        expected = {int(row.code): row.meaning for row in exit_rows(command)}
        assert listed_rows(help_text) == expected, command
    rendered = {command for command, _ in pages}
    named = {command for row in EXIT_CODES for command in row.commands}
    assert named == rendered, "a command in EXIT_CODES has no --help that renders it"


def test_no_command_gives_a_code_two_meanings() -> None:
    named = {command for row in EXIT_CODES for command in row.commands}
    for command in named:
        codes = [row.code for row in exit_rows(command)]
        assert len(codes) == len(set(codes)), command
    assert all(row.meaning and row.commands for row in EXIT_CODES)


def error_classes() -> set[type[IrtraceError]]:
    """Every ``IrtraceError`` subclass defined in the tools' packages (all their modules imported)."""
    for package in (irtrace, passdiff, passviz):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith(".__main__"):  # runs the tool
                importlib.import_module(module.name)
    found: set[type[IrtraceError]] = set()
    pending: list[type[IrtraceError]] = [IrtraceError]
    while pending:
        for subclass in pending.pop().__subclasses__():
            found.add(subclass)
            pending.append(subclass)
    return found


def test_the_code_of_every_error_class_is_in_its_tools_rows() -> None:
    classes = error_classes()
    assert GraphvizMissingError in classes and len(classes) > 15
    for error in classes:
        tool = error.__module__.split(".")[0]
        codes = {int(row.code) for row in exit_rows(tool)}
        assert int(error.exit_code) in codes, f"{error.__module__}.{error.__name__}: exit {error.exit_code}"


def test_a_missing_graphviz_is_an_environment_error_in_passviz_help() -> None:
    assert GraphvizMissingError.exit_code == ExitCode.ENVIRONMENT
    (row,) = [row for row in exit_rows("passviz") if row.code == ExitCode.ENVIRONMENT]
    assert "Graphviz" in row.meaning
    (input_row,) = [row for row in exit_rows("passviz") if row.code == ExitCode.INPUT]
    assert "not installed" not in input_row.meaning


DOCUMENTED = (
    ("irtrace.md", "### Exit codes", IRTRACE),
    ("ci.md", "### Exit codes", "irtrace check"),
    ("passdiff.md", "## Exit codes", "passdiff"),
    ("passviz.md", "## Exit codes", "passviz"),
)


@pytest.mark.parametrize(("doc", "heading", "command"), DOCUMENTED)
def test_the_docs_tables_are_the_rows_of_the_one_table(doc: str, heading: str, command: str) -> None:
    text = (ROOT / "docs" / doc).read_text()
    section = text[text.index(heading) :]
    rows = re.findall(
        r"^\| (\d+) \| (.*) \|$", section[: section.index("\n\n", section.index("| code |"))], re.M
    )
    assert {int(code): meaning for code, meaning in rows} == {
        int(row.code): row.meaning for row in exit_rows(command)
    }, f"docs/{doc}: copy the rows of exit_rows({command!r})"
