"""Time to the first complete completion after ``T.`` on a cold language server, against the old
route (importing tilelang to introspect its API), measured in the same run.

For each repeat: a real ``tilelang-lsp`` server with an empty cache folder is started, initialized
as an untrusted editor, a kernel with ``T.`` typed in it is opened and completion asked for at
once; the time runs from the server's start (and, separately, from the request) to the first
answer that is complete (not ``isIncomplete``, every name of ``tilelang.language.__all__``, which
this script imports after the servers ran). Then a second server on the same cache (the warm
start). The baseline is the old route's floor: a fresh interpreter importing ``tilelang.language``
and reading each public name with ``inspect`` (what ``tilelang_lsp/worker/api_index.py`` did
before it was removed), timed the same way.

Ends with one line: ``RESULT first_completion_s=<median, from the request> cold_start_s=<median,
from the server's start> warm_start_s=<from the start, cached> import_route_s=<median>
ratio=<import_route_s / cold_start_s> complete=<1 if every first answer was complete>
origins=<where each server's index came from: source, cache, ...>``. ``--smoke`` (for CI) runs
one repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp.client import make_test_lsp_client

ROOT = Path(__file__).resolve().parent.parent
TEXT = "import tilelang.language as T\n\n\ndef kernel():\n    T.\n"
AT = types.Position(line=4, character=6)
origins: list[str] = []
"""Where each server's index came from (``source``, then ``cache`` for the warm start)."""
IMPORT_ROUTE = (
    "import inspect, time\n"
    "t = time.perf_counter()\n"
    "import tilelang.language as T\n"
    "for name in T.__all__:\n"
    "    value = getattr(T, name, None)\n"
    "    try:\n"
    "        inspect.signature(value)\n"
    "    except (TypeError, ValueError):\n"
    "        pass\n"
    "    inspect.getdoc(value)\n"
    "print(time.perf_counter() - t)\n"
)


async def first_completion(cache: str) -> tuple[float, float, set[str], bool]:
    """``(from the start, from the request, labels, complete)`` of one server's first answer."""
    started = time.perf_counter()
    client = make_test_lsp_client()
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    await client.start_io(sys.executable, "-m", "tilelang_lsp.cli", env=env, cwd=str(ROOT))
    try:
        await client.initialize_session(
            types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=ROOT.as_uri())
        )
        folder = Path(tempfile.mkdtemp(prefix="lsp-cold-"))
        uri = (folder / "kernel.py").as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, TEXT))
        )
        asked = time.perf_counter()
        result = await client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), AT)
        )
        answered = time.perf_counter()
        shutil.rmtree(folder, ignore_errors=True)
        deadline = time.monotonic() + 120  # the whole index read and cached before the next start
        while time.monotonic() < deadline:
            status: Any = await client.protocol.send_request_async("tilelang/workerStatus", {})
            if status.apiIndex is not None:
                origins.append(status.apiIndex.origin)
                break
            await asyncio.sleep(0.05)
    finally:
        await client.shutdown_session()
        await client.stop()
    complete = isinstance(result, types.CompletionList) and not result.is_incomplete
    labels = {item.label for item in result.items} if isinstance(result, types.CompletionList) else set()
    return answered - started, answered - asked, labels, complete


def import_route() -> float:
    run = subprocess.run([sys.executable, "-c", IMPORT_ROUTE], capture_output=True, text=True, check=True)
    return float(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one repeat: for CI")
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 1
    cold, request, warm, baseline, answers = [], [], [], [], []
    for index in range(args.repeat):
        cache = tempfile.mkdtemp(prefix="lsp-cold-cache-")
        try:
            from_start, from_request, labels, complete = asyncio.run(first_completion(cache))
            warm_start, _, warm_labels, warm_complete = asyncio.run(first_completion(cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        cold.append(from_start)
        request.append(from_request)
        warm.append(warm_start)
        answers += [(labels, complete), (warm_labels, warm_complete)]
        baseline.append(import_route())
        print(
            f"run {index + 1}: cold {from_start:.2f} s from the start ({from_request:.2f} s from the "
            f"request), warm {warm_start:.2f} s, import route {baseline[-1]:.2f} s"
        )
    import tilelang.language as T

    expected = set(T.__all__)
    all_complete = all(complete and labels == expected for labels, complete in answers)
    cold_s, import_s = statistics.median(cold), statistics.median(baseline)
    print(
        f"RESULT first_completion_s={statistics.median(request):.3f} cold_start_s={cold_s:.3f} "
        f"warm_start_s={statistics.median(warm):.3f} import_route_s={import_s:.3f} "
        f"ratio={import_s / cold_s:.2f} complete={int(all_complete)} origins={','.join(origins)}"
    )


if __name__ == "__main__":
    main()
