"""Completion, signature help, API hover and go-to-definition in an untrusted workspace, against
TileLang's own signatures and source read in the test with ``inspect`` and ``ast``.

The server never starts a worker here: the API index is read from TileLang's source files (an
empty cache folder is given), so these answers need no trust."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import os
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import ROOT, SERVER, open_fresh, recording_client

CACHE = tempfile.mkdtemp(prefix="tilelang-lsp-api-cache-")
CONFIG = ClientServerConfig(
    server_command=SERVER,
    client_factory=recording_client,
    server_env={**os.environ, "XDG_CACHE_HOME": CACHE},
)
pytestmark = pytest.mark.asyncio(loop_scope="module")

KERNEL = """import tilelang
import tilelang.language as T
from tilelang.language import alloc_shared as shared


@tilelang.jit
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype=T.float16):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared, disable_tma=True)
                T.gemm(A_shared, B_shared, C_local, transpose_B=False)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm
"""


@pytest_lsp.fixture(config=CONFIG, scope="module", loop_scope="module")
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    await start_reading_markdown(lsp_client)  # not trusted
    yield
    await lsp_client.shutdown_session()


async def start_reading_markdown(client: LanguageClient, **options: Any) -> None:
    """Initialize as an editor that shows Markdown in completion docs."""
    item = types.ClientCompletionItemOptions(documentation_format=[types.MarkupKind.Markdown])
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            completion=types.CompletionClientCapabilities(completion_item=item)
        )
    )
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities, root_uri=ROOT.as_uri(), initialization_options=options
        )
    )


def language() -> ModuleType:
    import tilelang.language

    return tilelang.language


def position(text: str, needle: str, offset: int = 0) -> types.Position:
    """The position ``offset`` characters into the first occurrence of ``needle``."""
    index = text.index(needle) + offset
    line = text.count("\n", 0, index)
    return types.Position(line=line, character=index - (text.rfind("\n", 0, index) + 1))


async def complete(client: LanguageClient, uri: str, at: types.Position) -> list[types.CompletionItem]:
    """Completion items at ``at``: the first answer, complete (never an empty list to ask again)."""
    result: Any = await client.text_document_completion_async(
        types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=at)
    )
    assert isinstance(result, types.CompletionList) and not result.is_incomplete
    return list(result.items)


def parameter_names(value: Any) -> list[tuple[str, str]]:
    """``(name, kind)`` of each parameter, as ``inspect`` binds them: the oracle for signatures the
    index reads from the ``def``."""
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.KEYWORD_ONLY: "keyword",
        inspect.Parameter.VAR_POSITIONAL: "var_positional",
        inspect.Parameter.VAR_KEYWORD: "var_keyword",
    }
    return [(p.name, kinds[p.kind]) for p in inspect.signature(value).parameters.values()]


def signature_names(signature: str) -> list[tuple[str, str]]:
    """The same read back from a signature the server shows (``(A, B, *, x: int = 1) -> T``)."""
    arguments = ast.parse(f"def f{signature}: pass").body[0].args  # type: ignore[attr-defined]
    found = [(a.arg, "positional") for a in [*arguments.posonlyargs, *arguments.args]]
    found += [(arguments.vararg.arg, "var_positional")] if arguments.vararg else []
    found += [(a.arg, "keyword") for a in arguments.kwonlyargs]
    found += [(arguments.kwarg.arg, "var_keyword")] if arguments.kwarg else []
    return found


def document(tmp: str = "api_kernel.py", text: str = KERNEL) -> Path:
    path = Path(tempfile.mkdtemp(prefix="tilelang-lsp-api-")) / tmp
    path.write_text(text)
    return path


async def test_completion_after_T_is_tilelang_language_with_real_signatures(client: LanguageClient) -> None:
    text = KERNEL.replace("            T.clear(C_local)\n", "            T.\n")
    uri, _ = open_fresh(client, document(text=text))
    items = await complete(client, uri, position(text, "            T.\n", 14))
    T = language()
    by_name = {item.label: item for item in items}
    assert set(by_name) == set(T.__all__)
    for name in ("gemm", "copy", "Kernel", "alloc_fragment", "Pipelined", "clear"):
        item = by_name[name]
        value = getattr(T, name)
        assert item.detail is not None and item.detail.startswith(name + "(")
        assert signature_names(item.detail[len(name) :]) == parameter_names(value)
        assert item.kind == types.CompletionItemKind.Function
        first_doc_line = (inspect.getdoc(value) or "").splitlines()[0]
        assert isinstance(item.documentation, types.MarkupContent)
        assert first_doc_line in item.documentation.value
    # what the installed tilelang no longer has is never offered (earlier releases had these under T.)
    gone = [n for n in ("make_swizzled_layout", "annotate_padding", "get_mbarrier") if not hasattr(T, n)]
    assert gone and not set(gone) & set(by_name)


async def test_completion_filters_by_prefix_and_follows_the_module_path(client: LanguageClient) -> None:
    text = (
        KERNEL
        + "\nx = T.alloc_\ny = tilelang.language.alloc_\nz = tilelang.\nfrom tilelang.language import Pipe\n"
    )
    uri, _ = open_fresh(client, document(text=text))
    T = language()
    expected = {n for n in T.__all__ if n.lower().startswith("alloc_")}
    through_alias = await complete(client, uri, position(text, "x = T.alloc_", 12))
    through_path = await complete(client, uri, position(text, "y = tilelang.language.alloc_", 28))
    assert {i.label for i in through_alias} == {i.label for i in through_path} == expected
    import tilelang

    top = {i.label for i in await complete(client, uri, position(text, "z = tilelang.", 13))}
    assert {"jit", "compile", "language", "autotune"} <= top
    # each an attribute of the imported package, or a subpackage one may import (``tilelang.testing``)
    assert all(hasattr(tilelang, n) or importlib.util.find_spec(f"tilelang.{n}") for n in top)
    imported = await complete(client, uri, position(text, "import Pipe", 11))
    assert {i.label for i in imported} == {"Pipelined"}


async def test_signature_help_names_the_active_parameter(client: LanguageClient) -> None:
    uri, _ = open_fresh(client, document())
    T = language()
    cases = [
        ("T.gemm(A_shared, B_shared, C_local", 27, "gemm", "C"),  # third positional argument
        ("transpose_B=False", 12, "gemm", "transpose_B"),  # a keyword argument
        ("B_shared, disable_tma=True", 22, "copy", "disable_tma"),  # a keyword-only one
        ("num_stages=3", 11, "Pipelined", "num_stages"),
        ("threads=128", 8, "Kernel", "threads"),
    ]
    for needle, offset, name, parameter in cases:
        result = await client.text_document_signature_help_async(
            types.SignatureHelpParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=position(KERNEL, needle, offset)
            )
        )
        assert result is not None, needle
        signature = result.signatures[0]
        assert signature.label.startswith(f"T.{name}(")
        assert signature_names(signature.label[len(f"T.{name}") :]) == parameter_names(getattr(T, name))
        names = list(inspect.signature(getattr(T, name)).parameters)
        assert result.active_parameter == names.index(parameter), needle
        start, end = signature.parameters[result.active_parameter].label  # type: ignore[index, misc]
        assert signature.label[start:end].lstrip("*").startswith(parameter)


async def test_hover_shows_api_docs_and_definition_lands_on_the_def_line(client: LanguageClient) -> None:
    uri, _ = open_fresh(client, document())
    T = language()
    for needle, name in (
        ("T.gemm(", "gemm"),
        ("T.alloc_fragment(", "alloc_fragment"),
        ("shared((", "alloc_shared"),
    ):
        at = position(KERNEL, needle, needle.index(name[:3]) + 1 if needle.startswith("T.") else 1)
        value = inspect.unwrap(getattr(T, name))
        hover = await client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=at)
        )
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        shown = hover.contents.value.split("\n")[1]  # ```python, then the declaration
        assert shown.startswith("def ") and "(" in shown
        assert signature_names(shown[shown.index("(") :]) == parameter_names(getattr(T, name))
        assert (inspect.getdoc(value) or "").splitlines()[0] in hover.contents.value
        location = await client.text_document_definition_async(
            types.DefinitionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=at)
        )
        assert isinstance(location, types.Location), needle
        source_file = inspect.getsourcefile(value)
        assert source_file is not None and location.uri == Path(source_file).as_uri()
        tree = ast.parse(Path(source_file).read_text())
        defs = [
            n.lineno for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == value.__name__
        ]
        assert location.range.start.line + 1 in defs
        line = Path(source_file).read_text().splitlines()[location.range.start.line]
        assert line.lstrip().startswith(f"def {value.__name__}(")


async def test_buffer_names_get_no_api_docs_and_nothing_ran(client: LanguageClient) -> None:
    uri, _ = open_fresh(client, document())
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=position(KERNEL, "C_local = ", 1)
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "From the source only" in hover.contents.value  # the buffer's hover, as before
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.pid is None  # no worker: the index was read from TileLang's files
    deadline = time.monotonic() + 120
    while status.apiIndex is None and time.monotonic() < deadline:  # the whole index, cache written
        await asyncio.sleep(0.1)
        status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert status.apiIndex.origin in ("source", "cache")
    assert any(Path(CACHE, "tilelang-lsp", "api").glob("*.json"))
