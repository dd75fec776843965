"""Where the tilelang an interpreter would import is, and its version, found without importing it.

For this process's environment it is read here (package metadata, else the path finder, which
locates a package without running it). For another interpreter (the ``python`` option of a trusted
workspace) ``python -P -m tilelang_lsp.api.installed`` prints the same, run in an empty folder so
nothing of the workspace is on its path.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.machinery
import importlib.metadata
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

LOCATE_TIMEOUT_S = 20.0
"""Starting an interpreter on a loaded machine (it imports nothing but the standard library)."""


@dataclass(frozen=True)
class Installation:
    folder: str
    """The ``tilelang`` package folder."""
    version: str


def installation_here() -> Installation | None:
    """The tilelang this interpreter would import: its installed distribution, else the package
    the path finder locates on ``sys.path`` (a source checkout), the current folder left out."""
    version = "unknown"
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        distribution = importlib.metadata.distribution("tilelang")
        version = str(distribution.version)
        folder = Path(str(distribution.locate_file("tilelang")))
        if (folder / "__init__.py").is_file():
            return Installation(str(folder), version)
    here = os.getcwd()
    path = [p for p in sys.path if p and os.path.abspath(p) != here]
    spec = importlib.machinery.PathFinder.find_spec("tilelang", path)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations or not os.path.isfile(os.path.join(locations[0], "__init__.py")):
        return None
    return Installation(str(locations[0]), version)


async def find_installation(python: str | None) -> Installation | None:
    """The tilelang ``python`` (``None``: this interpreter's environment) would import."""
    from tilelang_lsp.worker_client import same_environment

    if python is None or same_environment(python):
        return installation_here()
    import tilelang_lsp

    env = dict(os.environ)
    ours = str(Path(tilelang_lsp.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ours, env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="tilelang-lsp-locate-") as folder:
        try:
            process = await asyncio.create_subprocess_exec(
                python,
                "-P",
                "-m",
                "tilelang_lsp.api.installed",
                cwd=folder,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError:
            return None
        try:
            output, _ = await asyncio.wait_for(process.communicate(), LOCATE_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            return None
    return _parse(output)


def _parse(output: bytes) -> Installation | None:
    try:
        found = json.loads(output.decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    if not isinstance(found, dict):
        return None
    folder, version = found.get("folder"), found.get("version")
    if not isinstance(folder, str) or not isinstance(version, str) or len(version) > 200:
        return None
    if not os.path.isabs(folder) or not os.path.isfile(os.path.join(folder, "__init__.py")):
        return None
    return Installation(folder, version)


def main() -> None:
    found = installation_here()
    print(json.dumps(None if found is None else {"folder": found.folder, "version": found.version}))


if __name__ == "__main__":
    main()
