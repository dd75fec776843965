"""A real tilelang-lsp server (and its real worker) per test module, driven by pytest-lsp."""

from __future__ import annotations

import ast
import asyncio
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import make_test_lsp_client

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"
SERVER = [sys.executable, "-m", "tilelang_lsp.cli"]


def styles_corpus(folder: Path) -> Path:
    """The kernel-style corpus (``data/styles``) written into ``folder``, with its kernel package
    ``quantpkg`` completed from ``examples/fp8_quant.py``."""
    shutil.copytree(DATA / "styles", folder, ignore=shutil.ignore_patterns("__pycache__"))
    write_quant_package(folder / "quantpkg")
    return folder


def write_quant_package(package: Path) -> None:
    """The FP8 example laid out as a project lays out a kernel package: its platform facts in
    ``platform.py``, its kernel under ``@tilelang.jit`` in ``kernels/per_token.py``, importing them
    relatively. The pieces are the example's own source, so the two never drift apart."""
    example = (EXAMPLES / "fp8_quant.py").read_text()
    pieces: dict[str, str] = {}
    for node in ast.parse(example).body:
        if isinstance(node, ast.FunctionDef):
            pieces[node.name] = ast.get_source_segment(example, node) or ""
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            pieces[node.targets[0].id] = ast.get_source_segment(example, node) or ""
    (package / "platform.py").write_text(
        '"""Platform facts the kernels share: sizes and the FP8 format of the current target."""\n\n'
        "import tilelang.language as T\nfrom tvm.target import Target\n\n"
        f"{pieces['HIDDEN']}\n{pieces['FP8_MAX']}\n\n\n{pieces['determine_fp8_type']}\n"
    )
    (package / "kernels" / "per_token.py").write_text(
        '"""Per-token FP8 quantization in a package, built with expression arguments: a shift, a\n'
        "constant and two helper calls from sibling modules, one of which asks the current target for\n"
        'its FP8 type."""\n\n'
        "import tilelang\nimport tilelang.language as T\n\n"
        "from ..platform import FP8_MAX, HIDDEN, determine_fp8_type\nfrom ..tiling import pick_block_m\n\n\n"
        f"@tilelang.jit(out_idx=[1, 2])\n{pieces['per_token_quant']}\n\n\n"
        'if __name__ == "__main__":\n'
        "    kernel = per_token_quant(\n"
        "        1 << 14, HIDDEN, block_M=pick_block_m(HIDDEN), out_dtype=determine_fp8_type()\n"
        "    )\n"
        "    print(kernel.get_kernel_source())\n"
    )


def recording_client() -> LanguageClient:
    """pytest-lsp's client, also keeping every publishDiagnostics with its version."""
    client = make_test_lsp_client()
    client.published = []  # type: ignore[attr-defined]
    original = client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish(params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)  # type: ignore[attr-defined]
        original(params)

    client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish
    client.refreshes = []  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_refresh(params: None) -> None:
        client.refreshes.append("inlayHint")  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        client.refreshes.append("codeLens")  # type: ignore[attr-defined]

    return client


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=recording_client)


async def start(client: LanguageClient, **options: Any) -> None:
    """Initialize with inlay-hint and code-lens refresh support and the given options."""
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
            code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True),
        )
    )
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities, root_uri=ROOT.as_uri(), initialization_options=options
        )
    )


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=text or path.read_text()
            )
        )
    )
    return uri


def open_fresh(client: LanguageClient, path: Path, text: str | None = None) -> tuple[str, int]:
    """Open ``path`` as a new document, whatever earlier tests of the module did with it: an open
    copy is closed first, and the version is one no earlier publish of this server carried."""
    uri = path.as_uri()
    opened: dict[str, int] = client.__dict__.setdefault("fresh_versions", {})
    if uri in opened:
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    previous = [p.version or 0 for p in client.published if p.uri == uri]  # type: ignore[attr-defined]
    version = max([opened.get(uri, 0), *previous]) + 1000
    opened[uri] = version
    open_file(client, path, text, version=version)
    return uri, version


def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def wait_published(
    client: LanguageClient, uri: str, version: int, timeout: float = 120
) -> types.PublishDiagnosticsParams:
    """The first diagnostics published for ``uri`` at ``version``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for params in client.published:  # type: ignore[attr-defined]
            if params.uri == uri and params.version == version:
                return params
        await asyncio.sleep(0.02)
    raise TimeoutError(f"no diagnostics for {uri} version {version}")


async def hints(client: LanguageClient, uri: str) -> list[types.InlayHint]:
    result = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(0, 0), end=types.Position(10_000, 0)),
        )
    )
    return list(result or [])


def whole_file_server(**options: Any):  # type: ignore[no-untyped-def]
    """A module-scoped fixture: one server for the tests of a module."""

    @pytest_lsp.fixture(config=CONFIG, scope="module", loop_scope="module")
    async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
        await start(lsp_client, **options)
        yield
        await lsp_client.shutdown_session()

    return client
