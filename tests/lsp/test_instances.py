"""Kernels with nothing written for the language server, analyzed with the instance the program
really uses: recorded from a test suite run under ``IRTRACE=...``, or found by running the file's
own entry point up to its first compilation. Each hint is checked against the compiler's facts
for the program's own call (``program_oracle.py``: the program run with TileLang's compile entries
wrapped to lower the PrimFunc it is about to compile)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.irtrace.test_autocapture import SUITE, hooked_env
from tests.lsp.conftest import DATA, ROOT, hints, open_fresh, wait_published, whole_file_server
from tests.mcp.conftest import McpServer, start_server

INSTANCES = DATA / "instances"
ORACLE = Path(__file__).resolve().parent / "program_oracle.py"
RECORDED = Path(tempfile.mkdtemp(prefix="tilelang-lsp-instances-"))
"""Where the kernel suite is copied and its pytest run recorded (``irtrace.jsonl``)."""
SUITE_TRACE = RECORDED / "kernelsuite" / "irtrace.jsonl"

client = whole_file_server(trusted=True, extra_targets=[], summary=False, instance_traces=[str(SUITE_TRACE)])
pytestmark = pytest.mark.asyncio(loop_scope="module")


def oracle_runs(*runs: tuple[str, ...]) -> list[list[tuple[int, str]]]:
    """For each run (``program_oracle.py``'s arguments), ``(line, hint)`` of each buffer of the
    kernel the program compiles first, from the compiler: all runs in one oracle process."""
    done = subprocess.run(
        [sys.executable, str(ORACLE), "--many", json.dumps(runs)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert [status for status, _ in answers] == [0] * len(runs), (runs, done.stderr[-3000:])
    return [[(line, hint) for line, hint in json.loads(answer)] for _, answer in answers]


def program_hints(*arguments: str) -> list[tuple[int, str]]:
    """``(line, hint)`` of each buffer of the kernel the program compiles first, from the compiler."""
    return oracle_runs(arguments)[0]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    """The oracle's answers for the programs of this module's tests, by name, from one process
    (TileLang imported once): each test reads only its own."""
    # the eager program's copy whose tensors stay on the CPU (same shapes, dtypes and lines)
    cpu_copy = tmp_path_factory.mktemp("eager") / "eager_cuda.py"
    cpu_copy.write_text((INSTANCES / "eager_cuda.py").read_text().replace(".cuda()", ""))
    factories = str(INSTANCES / "factories.py")
    runs = {
        "eager_cuda": (str(cpu_copy),),
        "configs_loop": (str(INSTANCES / "configs_loop.py"),),
        "checked_kernels": ("--all", str(INSTANCES / "checked_kernels.py")),
        "gemm_relu": ("--symbolic", factories, "gemm_relu", "M", "N", "K"),
        # a tile of symbolic size crashes TileLang's layout inference (a segfault): declared facts
        "row_tiles": ("--symbolic", factories, "row_tiles", "M", "N", "--declared"),
    }
    return dict(zip(runs, oracle_runs(*runs.values()), strict=True))


async def summary(client: LanguageClient, uri: str, kernel: str) -> str:
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tilelang.kernelSummary", arguments=[uri, kernel, None])
    )
    assert isinstance(answer, dict)
    return str(answer["message"])


async def compiled_hints(client: LanguageClient, path: Path, text: str | None = None) -> tuple[str, list]:
    uri, version = open_fresh(client, path, text)
    await wait_published(client, uri, version)
    got = await hints(client, uri)
    return uri, sorted((h.position.line + 1, h.label) for h in got)


@pytest.mark.sweep  # slow; a sibling covers it in make test
async def test_argparse_program_gets_the_size_it_sets_after_parsing(client: LanguageClient) -> None:
    path = INSTANCES / "argparse_gemm.py"
    uri, got = await compiled_hints(client, path)
    expected = program_hints(str(path))
    assert got == expected
    assert (13, "[4096, 1024] float16 global") in got  # setattr(args, "m", 4096), not argparse's 1024
    assert "arguments from __main__" in await summary(client, uri, "matmul")


async def test_a_program_that_cannot_reach_its_call_shows_symbols_never_the_parser_default(
    client: LanguageClient, tmp_path: Path
) -> None:
    text = (INSTANCES / "argparse_gemm.py").read_text()
    # the program now fails before its call (no GPU here): nothing may be guessed from the parser
    text = text.replace("    setattr(args,", "    raise RuntimeError('needs a GPU')\n    setattr(args,")
    path = tmp_path / "argparse_gemm.py"
    path.write_text(text)
    uri, got = await compiled_hints(client, path)
    assert not any("1024" in label and "source only" not in label for _, label in got)
    message = await summary(client, uri, "matmul")
    assert "Symbolic (no value found): M, N, K" in message, message
    assert (13, "[M, K] float16 global") in got  # the sizes nobody gives keep their names


async def test_eager_kernel_called_with_cuda_tensors_works_without_a_gpu(
    client: LanguageClient, oracle: dict[str, list[tuple[int, str]]]
) -> None:
    path = INSTANCES / "eager_cuda.py"
    uri, got = await compiled_hints(client, path)
    # the oracle runs a copy of the program whose tensors stay on the CPU (same shapes and dtypes)
    assert got == oracle["eager_cuda"]
    assert (10, "[96, 64] float16 global") in got  # M, N from the tensors made before the call
    assert (13, "[16, 64] float16 shared.dyn") in got  # block_M=16 from the call
    assert "arguments from __main__" in await summary(client, uri, "scale_rows")


async def test_loop_over_configs_gets_the_first_config_the_program_compiles(
    client: LanguageClient, oracle: dict[str, list[tuple[int, str]]]
) -> None:
    path = INSTANCES / "configs_loop.py"
    _, got = await compiled_hints(client, path)
    assert got == oracle["configs_loop"]
    assert any(label.startswith("[16, 64] float32 shared.dyn") for _, label in got)


@pytest.fixture(scope="module")
def recorded_suite() -> Path:
    """The kernel suite's own pytest run, recorded with ``IRTRACE=irtrace.jsonl``."""
    package = SUITE_TRACE.parent
    if not SUITE_TRACE.exists():
        shutil.copytree(SUITE, package)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
            cwd=package,
            env=hooked_env(
                RECORDED, IRTRACE="irtrace.jsonl", KERNELSUITE_ORACLE=str(RECORDED / "oracle.tsv")
            ),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return package


@pytest.mark.sweep  # 30 s on 2 cores with its recording: with the sweeps, to keep make test within 10 minutes
async def test_recorded_test_suite_instances_and_picking_one(
    client: LanguageClient, recorded_suite: Path
) -> None:
    path = recorded_suite / "kernels.py"
    uri, got = await compiled_hints(client, path)
    test_32 = f"{recorded_suite / 'kernel_tests.py'}::test_copy[32]"
    test_64 = f"{recorded_suite / 'kernel_tests.py'}::test_copy[64]"
    scale_test = f"{recorded_suite / 'kernel_tests.py'}::test_scale"
    copy_64, copy_32, scale = oracle_runs(
        ("--pytest", test_64), ("--pytest", test_32), ("--pytest", scale_test)
    )
    expected = sorted(copy_32 + scale)
    assert got == expected
    assert "arguments from kernel_tests.py::test_copy[32]" in await summary(client, uri, "tiled_copy")
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    picks = [
        lens.command
        for lens in lenses or []
        if lens.command and lens.command.command == "tilelang.useInstance"
    ]
    assert [(c.title, list(c.arguments or [])) for c in picks] == [
        ("use kernel_tests.py::test_copy[64]", [uri, "tiled_copy", "kernel_tests.py::test_copy[64]"])
    ]
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=picks[0].command, arguments=picks[0].arguments)
    )
    for _ in range(600):
        if "arguments from kernel_tests.py::test_copy[64]" in await summary(client, uri, "tiled_copy"):
            break
        await asyncio.sleep(0.1)
    got = sorted((h.position.line + 1, h.label) for h in await hints(client, uri))
    assert got == sorted(copy_64 + scale)


async def test_the_entry_point_run_writes_nothing_beside_the_program(
    client: LanguageClient, tmp_path: Path
) -> None:
    """What the program writes by relative path before its call (a log, a cache) lands in a
    scratch folder that is removed, never beside the file being edited."""
    text = (INSTANCES / "argparse_gemm.py").read_text()
    text = text.replace(
        "    setattr(args,", "    open('side_effect.log', 'w').write('ran')\n    setattr(args,"
    )
    path = tmp_path / "argparse_gemm.py"
    path.write_text(text)
    uri, _ = await compiled_hints(client, path)
    assert "arguments from __main__" in await summary(client, uri, "matmul")  # it did run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argparse_gemm.py"]
    assert not (Path.cwd() / "side_effect.log").exists()  # nor in the folder the server runs in


async def test_a_program_checking_each_kernel_on_the_gpu_gives_every_kernel_its_instance(
    client: LanguageClient, oracle: dict[str, list[tuple[int, str]]]
) -> None:
    """TileLang's examples check and bench each kernel on the GPU before building the next: the run
    goes on past each one (a stand-in kernel, meta tensors), so every kernel gets the program's
    instance, the ``@autotune`` one with its first config."""
    path = INSTANCES / "checked_kernels.py"
    uri, got = await compiled_hints(client, path)
    assert got == oracle["checked_kernels"]
    assert (80, "[32, 256] float16 shared.dyn") in got  # tuned_copy(N, K): the first config's block_M
    for kernel in ("naive_gemv", "row_sum", "scale_rows", "tuned_copy"):
        assert "arguments from __main__" in await summary(client, uri, kernel), kernel


async def test_factories_nobody_calls_show_symbols_exactly_where_the_file_gives_no_value(
    client: LanguageClient, oracle: dict[str, list[tuple[int, str]]]
) -> None:
    """A module of factories with no entry point: the sizes nobody gives are lowered as symbols, so
    the buffers that depend only on defaults are exact and the others show the parameter's name;
    a factory that needs a number says what would give it, never "did not build"."""
    path = INSTANCES / "factories.py"
    uri, got = await compiled_hints(client, path)
    assert sorted(oracle["gemm_relu"] + oracle["row_tiles"]) == [
        (line, label) for line, label in got if line < 40
    ]
    # which buffers show a symbol: exactly those whose shape uses a size nobody gives
    shows_symbol = {line for line, label in got if line < 40 and any(n in label.split("]")[0] for n in "MNK")}
    assert shows_symbol == {11, 32, 34}  # A, B, C; X, Y; the row tile [64, N]
    assert (34, "[64, N] float32 shared.dyn") in got
    assert (13, "[128, 32] ×2 float16 shared.dyn · swizzle 64B") in got
    assert "Symbolic (no value found): M, N, K" in await summary(client, uri, "gemm_relu")
    needs = [label for line, label in got if line > 40]
    assert needs and all("no value for batch, heads, dim" in label for label in needs), needs
    assert not any("did not build" in label for _, label in got)


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    """tilelang-mcp, allowed to run the instance test files."""
    with open(tmp_path_factory.mktemp("mcp") / "stderr.txt", "w+", encoding="utf-8") as log:
        yield from start_server(["--root", str(INSTANCES)], log)


def mcp_hint(buffer: dict[str, Any]) -> str:
    """A buffer of the MCP server's ``buffer_facts`` as the editor's hint writes it."""
    shape, allocated = list(buffer["shape"]), list(buffer["allocated_shape"])
    text = "[" + ", ".join(str(d) for d in shape) + "]"
    if len(allocated) == len(shape) + 1 and allocated[1:] == shape:
        text += f" ×{allocated[0]}"
    text += f" {buffer['dtype']} {buffer['scope']}"
    return text + (f" · {buffer['layout_short']}" if buffer.get("layout_short") else "")


@pytest.mark.parametrize(
    ("name", "kernels", "lowered"),
    [
        ("checked_kernels.py", ("naive_gemv", "row_sum", "scale_rows", "tuned_copy"), "naive_gemv"),
        ("factories.py", ("gemm_relu", "row_tiles"), "row_tiles"),  # symbols, built, not lowered
    ],
)
async def test_the_mcp_server_and_the_language_server_use_the_same_instance_and_facts(
    client: LanguageClient, mcp_server: McpServer, name: str, kernels: tuple[str, ...], lowered: str
) -> None:
    """The same file, nothing written: a kernel named without arguments gets from the MCP server
    the instance the editor shows (the same resolver, the same words) and the same buffers;
    ``lower_kernel`` reports the instance it lowered in those words too."""
    path = INSTANCES / name
    uri, got = await compiled_hints(client, path)
    from_mcp: list[tuple[int, str]] = []
    for kernel in kernels:
        answer = mcp_server.ok("buffer_facts", spec=f"{name}::{kernel}", target="cuda:sm_90a")
        (entry,) = answer["kernels"]
        instance = entry["instance"]
        message = await summary(client, uri, kernel)
        assert f"Analyzed `{instance['call']}` — arguments from {instance['origin']};" in message
        from_mcp += [(b["line"], mcp_hint(b)) for b in entry["buffers"]]
        if kernel == lowered:  # one lowering per file (the cheapest: the agreement is in the words)
            lowered = mcp_server.ok("lower_kernel", spec=f"{name}::{kernel}", targets=["cuda:sm_90a"])
            assert lowered["runs"][0]["instance"] == instance
    assert sorted(from_mcp) == [(line, label) for line, label in got if "source only" not in label]
