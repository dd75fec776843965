"""The command line, the MCP server and the language server give every kernel of a file the same
instance, in the same words, with nothing written: ``irtrace instances FILE.py --json`` (what
``irtrace record FILE.py::kernel`` takes), the MCP server's ``buffer_facts`` and the editor's
kernel summary. On the bundled examples, the test data, the instance-style test files and a few
of TileLang's own examples (``tests/data/tilelang_examples``, copied with their license line).

Which instance is right is checked elsewhere against the program's own calls
(``test_instances.py``, ``tests/irtrace/test_record_resolved.py``); here, that three tools never
part ways on one file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from irtrace.cli.main import main
from tests.lsp.conftest import DATA, ROOT, open_fresh, wait_published, whole_file_server
from tests.mcp.conftest import McpServer, start_server

TARGET = "cuda:sm_90a"
EXAMPLES = ROOT / "examples"
TEST_DATA = ROOT / "tests" / "data"
INSTANCES = DATA / "instances"
TILELANG = TEST_DATA / "tilelang_examples"

QUICK = [INSTANCES / "checked_kernels.py", TILELANG / "example_dequant_gemm_fp4_hopper.py"]
"""In the quick suite: a main() that checks each kernel on the GPU, and TileLang's own example
whose one kernel comes from __main__ and the other from a call written with tuple unpacking."""
SWEEP = [
    *(EXAMPLES / name for name in ("gemm.py", "flash_attention.py", "rmsnorm.py", "eager_gemm.py")),
    *(EXAMPLES / name for name in ("autotune_gemm.py", "hopper_tma_gemm.py", "fp8_quant.py")),
    *(TEST_DATA / name for name in ("tilelang_example_gemm.py", "jit_kernels.py", "gemm_k_by_n.py")),
    *(TEST_DATA / name for name in ("row_reduce.py", "fragment_scale.py", "two_workspaces.py")),
    *(INSTANCES / name for name in ("argparse_gemm.py", "configs_loop.py", "eager_cuda.py", "factories.py")),
    TILELANG / "example_elementwise_add.py",
    TILELANG / "rms_norm.py",
]

client = whole_file_server(trusted=True, extra_targets=[], summary=False)
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with open(tmp_path_factory.mktemp("mcp") / "stderr.txt", "w+", encoding="utf-8") as log:
        yield from start_server(
            ["--root", str(EXAMPLES), "--root", str(TEST_DATA), "--root", str(INSTANCES)], log
        )


def cli_instances(
    path: Path, cwd: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    """``irtrace instances FILE.py --json``, run in an empty folder (no recorded runs there), in
    this process (``main``): its answer is the point, not a process boundary."""
    monkeypatch.chdir(cwd)
    capfd.readouterr()
    code = main(["instances", str(path), "-t", TARGET, "--json"])
    out, err = capfd.readouterr()
    assert code == 0, err[-3000:]
    kernels: list[dict[str, Any]] = json.loads(out)["kernels"]
    return kernels


async def editor_summary(client: LanguageClient, uri: str, kernel: str) -> str:
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tilelang.kernelSummary", arguments=[uri, kernel, None])
    )
    assert isinstance(answer, dict)
    return str(answer["message"])


async def assert_three_agree(
    client: LanguageClient,
    mcp: McpServer,
    path: Path,
    cwd: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernels = cli_instances(path, cwd, capfd, monkeypatch)
    assert kernels, f"{path.name}: the resolver found no kernel"
    uri, version = open_fresh(client, path)
    await wait_published(client, uri, version)
    for entry in kernels:
        kernel, instance = entry["kernel"], entry["instance"]
        message = await editor_summary(client, uri, kernel)
        assert f"Analyzed `{instance['call']}` — arguments from {instance['origin']};" in message, (
            path.name,
            kernel,
            message,
        )
        answer = mcp.call("buffer_facts", spec=f"{path}::{kernel}", target=TARGET, line=1)
        if answer.isError:  # a tile of a size nobody gives: it says which, in the resolver's terms
            text = answer.content[0].text  # type: ignore[union-attr]
            assert instance.get("symbolic") and all(s in text for s in instance["symbolic"]), text
            continue
        assert answer.structuredContent is not None
        (facts,) = answer.structuredContent["kernels"]
        assert facts["instance"] == instance, (path.name, kernel)


@pytest.mark.parametrize("path", QUICK, ids=lambda p: p.name)
async def test_cli_mcp_and_editor_take_one_instance(
    client: LanguageClient,
    mcp_server: McpServer,
    path: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await assert_three_agree(client, mcp_server, path, tmp_path, capfd, monkeypatch)


@pytest.mark.sweep  # about 20 files at 30-60 s each on 2 cores: with the sweeps
@pytest.mark.parametrize("path", SWEEP, ids=lambda p: p.name)
async def test_cli_mcp_and_editor_take_one_instance_on_every_example(
    client: LanguageClient,
    mcp_server: McpServer,
    path: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await assert_three_agree(client, mcp_server, path, tmp_path, capfd, monkeypatch)
