"""``tilelang-lsp``: start the language server on stdio (default) or TCP."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until the client exits."""
    parser = argparse.ArgumentParser(
        prog="tilelang-lsp",
        description="Language server for TileLang kernels: inlay hints, hover, diagnostics and code lenses "
        "from TileLang's real frontend and pipeline (run in a separate worker process).",
    )
    parser.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", nargs="?", const="127.0.0.1:2087", help="listen on TCP")
    parser.add_argument("--log-level", default="WARNING", help="logging level on stderr (default WARNING)")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    if args.version:
        from tilelang_lsp import __version__

        print(f"tilelang-lsp {__version__}")
        return
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)

    from tilelang_lsp.worker_client import prestart_worker

    prestart_worker()  # tilelang imports in the worker while pygls imports here
    from tilelang_lsp.server import create_server

    server = create_server()
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()


if __name__ == "__main__":
    main()
