"""The ``python`` option picks the environment the analysis runs in, even when that environment's
``python`` is a symlink to the same base binary as the server's (two venvs of one interpreter)."""

from __future__ import annotations

import asyncio
import site
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import CONFIG, EXAMPLES, ROOT, hints, open_fresh, start, wait_published

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second venv of this base interpreter that sees this one's packages through a ``.pth``
    file (so it can run the worker), but is its own environment (``sys.prefix``)."""
    folder = tmp_path_factory.mktemp("environments") / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    packages = subprocess.run(
        [str(folder / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()] + [str(ROOT)]
    (Path(packages) / "borrowed.pth").write_text("\n".join(lines) + "\n")
    return folder


@pytest_lsp.fixture(config=CONFIG, scope="module", loop_scope="module")
async def client(lsp_client: LanguageClient, other_venv: Path) -> AsyncIterator[None]:
    python = other_venv / "bin" / "python"
    await start(lsp_client, trusted=True, python=str(python), extra_targets=[], summary=False)
    yield
    await lsp_client.shutdown_session()


async def test_analysis_runs_in_the_environment_the_python_option_names(
    client: LanguageClient, other_venv: Path
) -> None:
    uri, version = open_fresh(client, EXAMPLES / "gemm.py")
    published = await wait_published(client, uri, version)
    assert list(published.diagnostics) == []
    assert "[128, 128] float32 local.fragment · 128 thr, 128 elem/thr" in [
        h.label for h in await hints(client, uri)
    ]
    status = await client.protocol.send_request_async("tilelang/workerStatus", {})
    assert Path(status.prefix).resolve() == other_venv.resolve()
    assert Path(status.prefix).resolve() != Path(sys.prefix).resolve()


async def test_the_api_index_is_read_from_the_tilelang_the_python_option_imports(
    client: LanguageClient,
) -> None:
    """Found by running that interpreter (``python -P -m tilelang_lsp.api.installed``), which only
    locates the package; the oracle is the folder the worker imported tilelang from."""
    deadline = asyncio.get_running_loop().time() + 180
    while True:
        status = await client.protocol.send_request_async("tilelang/workerStatus", {})
        if (status.tilelang and status.apiIndex) or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert Path(status.apiIndex.tilelang).resolve() == Path(status.tilelang).resolve()
