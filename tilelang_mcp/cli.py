"""``tilelang-mcp``: start the MCP server on stdio for an agent's client (docs/mcp.md)."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from irtrace import __version__
from irtrace.base.errors import ExitCode, exit_codes_help

EPILOG = (
    "Kernel files run only when they lie under a --root folder, each in a child process with a "
    "time and a memory limit. stdout carries MCP messages only; logs go to stderr.\n\n"
    + exit_codes_help("tilelang-mcp")
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilelang-mcp",
        description="An MCP server (stdio) whose tools lower TileLang kernels with the real compiler.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose kernel files and traces the tools may run and read (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="most seconds one tool call may spend lowering (default 120)",
    )
    parser.add_argument(
        "--memory-limit",
        type=int,
        default=8192,
        metavar="MB",
        help="memory a job may map on top of the worker's own (default 8192)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for folder in args.root:
        if not Path(folder).expanduser().is_dir():
            parser.exit(ExitCode.USAGE, f"tilelang-mcp: error: --root {folder!r} is not a folder\n")
    if not 0 < args.timeout < 1e6:
        parser.exit(ExitCode.USAGE, "tilelang-mcp: error: --timeout takes seconds above 0\n")
    if args.memory_limit < 64:
        parser.exit(ExitCode.USAGE, "tilelang-mcp: error: --memory-limit takes at least 64 (MB)\n")

    import anyio

    from tilelang_mcp.roots import AllowedRoots
    from tilelang_mcp.server import serve
    from tilelang_mcp.session import ServerConfig

    store = Path(tempfile.mkdtemp(prefix="tilelang-mcp-traces-"))
    config = ServerConfig(AllowedRoots(args.root), args.timeout, args.memory_limit, store)
    # Clients end a server that does not exit at once with SIGTERM: leave as on Ctrl-C, cleaning up.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        anyio.run(serve, config)
    except KeyboardInterrupt:
        pass
    finally:
        shutil.rmtree(store, ignore_errors=True)
    return ExitCode.OK


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
