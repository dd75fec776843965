"""``tilelang-lsp``: start the language server on stdio (default) or TCP."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until the client exits."""
    parser = argparse.ArgumentParser(
        prog="tilelang-lsp",
        description="Language server for TileLang kernels: inlay hints, hover, diagnostics and code lenses "
        "from TileLang's real frontend and pipeline (run in a separate worker process).",
        epilog=_exit_codes_on_help(sys.argv[1:] if argv is None else argv),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    parser.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        nargs="?",
        const="127.0.0.1:2087",
        help="listen on TCP (default 127.0.0.1:2087; port 0 picks a free one) for one client, which must "
        "send initializationOptions.token: the text of the token file the server writes (0600) and names "
        "on stderr",
    )
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        type=Path,
        help="with --tcp: where to write the token (default $XDG_RUNTIME_DIR/tilelang-lsp/tcp-PORT.token, "
        "else under ~/.cache)",
    )
    parser.add_argument("--log-level", default="WARNING", help="logging level on stderr (default WARNING)")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    address = None
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not port.isdigit() or int(port) > 65535:
            parser.error(f"--tcp: {args.tcp!r} is not HOST:PORT")
        address = (host or "127.0.0.1", int(port))
    if args.version:
        from tilelang_lsp import __version__

        print(f"tilelang-lsp {__version__}")
        return
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)

    from tilelang_lsp.worker_client import prestart_worker

    prestart_worker()  # tilelang imports in the worker while pygls imports here
    from tilelang_lsp.api.reading import prefetch

    prefetch()  # TileLang's API read from its source in a thread, while pygls imports
    from tilelang_lsp.app import create_server

    server = create_server()
    if address is not None:
        from tilelang_lsp.tcp import ListenError, serve_tcp

        try:
            serve_tcp(server, *address, token_file=args.token_file)
        except ListenError as error:
            print(f"tilelang-lsp: {error}", file=sys.stderr)
            sys.exit(2)
    else:
        server.start_io()


def _exit_codes_on_help(argv: list[str]) -> str | None:
    """The exit-code table for ``--help`` only: importing irtrace on every start would delay the
    worker's launch, which comes before the server's own imports."""
    if not {"-h", "--help"} & set(argv):
        return None
    from irtrace.base.errors import exit_codes_help

    return exit_codes_help("tilelang-lsp")


if __name__ == "__main__":
    main()
