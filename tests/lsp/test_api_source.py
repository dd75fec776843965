"""The API index read from source without importing, on packages written here in the idioms
TileLang uses (``__all__`` built from other modules' ``__all__``, comprehensions, set unions,
list-building loops, a module ``__getattr__``, hand-applied decorators, ``TYPE_CHECKING``, star
imports in a cycle), checked against Python itself: the same package imported in a subprocess.
Then hostile sources (cycles, huge and broken files), the cache's defences, and how the server
finds the tilelang an interpreter would import without running it."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from tilelang_lsp.api import cache
from tilelang_lsp.api.installed import find_installation, installation_here
from tilelang_lsp.api.source_index import MAX_FILE_BYTES, build_source_index
from tilelang_lsp.protocol import ApiEntry

PACKAGE = {
    "__init__.py": '''
        """A package laid out as TileLang is."""
        import os
        from . import language
        from .language import common as _common


        def jit(func=None, *, out_idx=None, **options):
            """Compile a kernel."""
        ''',
    "language/__init__.py": """
        from .common import *  # noqa
        from .common import __all__ as _COMMON_ALL
        from .ops import gemm as gemm, copy_tile
        from .cycle_a import *  # noqa

        __all__ = tuple(dict.fromkeys((*_COMMON_ALL, "gemm", "copy_tile", "a", "b")))
        del _COMMON_ALL
        """,
    "language/common.py": '''
        from __future__ import annotations
        from typing import TYPE_CHECKING
        from .forward import *  # noqa
        from .forward import __all__ as _FORWARD_ALL

        _BASES = ["float", "int"]
        _LANES = [1, 2]
        dtype_names = []
        for base in _BASES:
            for lane in _LANES:
                suffix = f"x{lane}" if lane != 1 else ""
                dtype_names.append(f"{base}16{suffix}")


        class dtype:
            """A data type."""

            def __init__(self, name: str, lanes: int = 1) -> None:
                self.name = name


        if TYPE_CHECKING:
            float16 = int
        else:
            float16 = dtype("float16")
        float16x2 = dtype("float16x2")
        int16 = dtype("int16")
        _SKIP = frozenset({"int16x2"}) | {"nothing"}
        __all__ = [n for n in dtype_names if n not in _SKIP] + ["dtype", "Parallel", *_FORWARD_ALL]


        def Parallel(*extents, coalesced_width: int | None = None):
            """Parallel loop."""
        ''',
    "language/forward.py": """
        import tilelang.language.ops as _ops

        __all__ = tuple(n for n in ("copy_tile", "hidden") if not n.startswith("hid")) + tuple(
            f"reduce_{op}" for op in ("sum", "max") if op != "max"
        )


        def __getattr__(name):
            if name in __all__:
                return getattr(_ops, name)
            raise AttributeError(name)
        """,
    "language/ops.py": '''
        import functools


        def _wrap(function):
            @functools.wraps(function)
            def inner(*args, **kwargs):
                return function(*args, **kwargs)

            return inner


        def _gemm(A, B, C, /, transpose_A: "bool" = False, *, policy=None, **annotations) -> None:
            """Tile GEMM."""


        gemm = _wrap(_gemm)


        def copy_tile(src, dst, *extra):
            """Copy a tile."""


        def reduce_sum(buffer, dim: int = -1):
            """Sum along a dimension."""
        ''',
    "language/cycle_a.py": """
        from .cycle_b import *  # noqa

        __all__ = ["a", "b"]


        def a():
            pass
        """,
    "language/cycle_b.py": """
        from .cycle_a import *  # noqa

        __all__ = ["b"]


        def b(x, y=2):
            pass
        """,
}

ORACLE = """
import inspect, json, tilelang.language as T
kinds = {0: "positional", 1: "positional", 2: "var_positional", 3: "keyword", 4: "var_keyword"}
entries = {}
for name in T.__all__:
    value = getattr(T, name)
    kind = "class" if inspect.isclass(value) else "function" if inspect.isroutine(value) else "value"
    parameters = None
    if kind != "value":
        parameters = [[p.name, kinds[p.kind]] for p in inspect.signature(value).parameters.values()]
    doc = (inspect.getdoc(value) or "").splitlines()
    entries[name] = [kind, parameters, doc[0] if doc else ""]
print(json.dumps({"all": list(T.__all__), "entries": entries}))
"""


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "tilelang" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root / "tilelang"


def described(entry: ApiEntry) -> list[object]:
    parameters = [[p.name, p.kind] for p in entry.parameters] if entry.kind != "value" else None
    return [entry.kind, parameters, entry.doc.splitlines()[0] if entry.doc else ""]


def test_the_index_reads_a_package_as_python_imports_it(tmp_path: Path) -> None:
    folder = write_package(tmp_path, PACKAGE)
    run = subprocess.run(
        [sys.executable, "-P", "-c", ORACLE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        check=True,
    )
    oracle = json.loads(run.stdout)
    index, files = build_source_index(folder, "1.0", ("tilelang.language", "tilelang"))
    language = {e.name: e for e in index.modules[0].entries}
    assert list(language) == oracle["all"]
    assert {name: described(entry) for name, entry in language.items()} == oracle["entries"]
    assert language["gemm"].signature == (
        "(A, B, C, /, transpose_A: bool = False, *, policy=None, **annotations) -> None"
    )
    gemm_line = (folder / "language/ops.py").read_text().splitlines()[language["gemm"].line - 1]  # type: ignore[operator]
    assert gemm_line.startswith("def _gemm(")  # the def the wrapper wraps
    top = {e.name: e for e in index.modules[1].entries}
    assert set(top) == {"language", "jit"}  # not ``os``; ``_common`` is private
    assert top["language"].kind == "module" and top["language"].module == "tilelang.language"
    assert all(str(f).startswith(str(folder)) for f in files)


HOSTILE = {
    "__init__.py": "",
    "language/__init__.py": """
        from .loop_a import x
        from .star_a import *  # noqa
        from .broken import *  # noqa
        from .huge import *  # noqa
        from .deep0 import deep
        import os.path as _p
        from os import *  # noqa
        from .all_a import *  # noqa

        __all__ = ["x", "deep", "ok"]


        def ok():
            pass
        """,
    "language/loop_a.py": "from .loop_b import x\n",
    "language/loop_b.py": "from .loop_a import x\n",
    "language/star_a.py": "from .star_b import *  # noqa\n",
    "language/star_b.py": "from .star_a import *  # noqa\n",
    "language/broken.py": "def broken(:\n",
    "language/all_a.py": "from .all_b import __all__ as _B\n__all__ = [*_B, 'a']\n",
    "language/all_b.py": "from .all_a import __all__ as _A\n__all__ = [*_A, 'b']\n",
}


def test_hostile_sources_end_and_name_nothing_they_do_not_bind(tmp_path: Path) -> None:
    files = dict(HOSTILE)
    for depth in range(100):  # a chain of re-exports longer than any real one
        files[f"language/deep{depth}.py"] = f"from .deep{depth + 1} import deep\n"
    files["language/deep100.py"] = "def deep():\n    pass\n"
    folder = write_package(tmp_path, files)
    (folder / "language/huge.py").write_text(
        "# padding\n" * (MAX_FILE_BYTES // 10 + 1) + "def huge(): pass\n"
    )
    began = time.monotonic()
    index, read = build_source_index(folder, "1.0", ("tilelang.language",))
    assert time.monotonic() - began < 30
    entries = {e.name: e for e in index.modules[0].entries}
    # all_a's __all__ needs all_b's, which needs all_a's unfinished one: unknown (Python raises
    # ImportError there); the names that resolve are described, the others stay bare values
    assert set(entries) == {"x", "deep", "ok"}
    assert entries["ok"].kind == "function"
    assert entries["x"].kind == "value" and entries["x"].file is None  # an import cycle
    assert entries["deep"].kind == "value"  # further than MAX_DEPTH re-exports: given up on
    assert folder / "language/huge.py" not in read and folder / "language/broken.py" not in read
    assert all(str(f).startswith(str(folder)) for f in read)  # never ``os``: only tilelang, tvm


def test_the_cache_round_trips_and_refuses_links_changes_and_garbage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = write_package(tmp_path / "site", PACKAGE)
    index, files = build_source_index(folder, "1.0")
    path = cache.save_cache(str(folder), "1.0", index, files)
    assert path is not None and path.stat().st_mode & 0o777 == 0o600
    assert cache.load_cache(str(folder), "1.0") == index
    assert cache.load_cache(str(folder), "2.0") is None  # another version: another file

    victim = tmp_path / "victim.json"
    victim.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(victim)
    assert cache.load_cache(str(folder), "1.0") is None  # never read through a link
    assert cache.save_cache(str(folder), "1.0", index, files) == path
    assert not path.is_symlink() and victim.read_bytes() == path.read_bytes()  # replaced, not followed
    victim.write_text("untouched")
    cache.save_cache(str(folder), "1.0", index, files)
    assert victim.read_text() == "untouched"

    path.write_bytes(b'{"format": 2, "folder": ' + b"[" * 10_000)
    assert cache.load_cache(str(folder), "1.0") is None  # garbage is ignored, not fatal
    cache.save_cache(str(folder), "1.0", index, files)
    ops = folder / "language/ops.py"
    ops.write_text(ops.read_text() + "\n\ndef added():\n    pass\n")
    assert cache.load_cache(str(folder), "1.0") is None  # a file it was read from changed

    other = tmp_path / "elsewhere"
    other.mkdir()
    moved = tmp_path / "cache2"
    (moved / "tilelang-lsp").mkdir(parents=True)
    (moved / "tilelang-lsp" / "api").symlink_to(other)
    monkeypatch.setenv("XDG_CACHE_HOME", str(moved))
    assert cache.save_cache(str(folder), "1.0", index, files) is None  # the cache folder is a link
    assert not any(other.iterdir())


def test_a_cache_file_of_another_shape_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = write_package(tmp_path / "site", PACKAGE)
    index, files = build_source_index(folder, "1.0")
    path = cache.save_cache(str(folder), "1.0", index, files)
    assert path is not None
    stored = msgspec.json.decode(path.read_bytes())
    for key, value in (("format", 1), ("folder", "/elsewhere"), ("stamps", [])):
        path.write_bytes(msgspec.json.encode({**stored, key: value}))
        assert cache.load_cache(str(folder), "1.0") is None, key


def test_the_installation_is_found_without_running_tilelang_or_the_workspace(tmp_path: Path) -> None:
    import tilelang  # the oracle: where the import really finds it

    decoy = tmp_path / "tilelang"
    decoy.mkdir()
    marker = tmp_path / "ran"
    (decoy / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    run = subprocess.run(
        [sys.executable, "-P", "-m", "tilelang_lsp.api.installed"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    found = json.loads(run.stdout)
    assert Path(found["folder"]).resolve() == Path(tilelang.__file__).parent.resolve()
    assert found["version"] == importlib.metadata.version("tilelang")
    assert not marker.exists()  # neither the workspace's decoy nor anything else was executed
    here = installation_here()
    assert here is not None and Path(here.folder).resolve() == Path(found["folder"]).resolve()
    base = Path(sys.base_prefix) / "bin" / "python3"
    if base.is_file():  # an interpreter without tilelang: nothing, and no error
        assert asyncio.run(find_installation(str(base))) is None
    assert asyncio.run(find_installation(str(tmp_path / "no-such-python"))) is None


def test_nothing_is_imported_to_read_the_api() -> None:
    code = (
        "import sys; from tilelang_lsp.api.installed import installation_here;"
        "from tilelang_lsp.api.source_index import build_source_index; from pathlib import Path;"
        "i = installation_here(); index, _ = build_source_index(Path(i.folder), i.version);"
        "assert len(index.modules[0].entries) > 500;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tilelang', 'tvm', 'torch')))"
    )
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=folder)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_every_module_is_read_as_the_import_gives_it() -> None:
    """Each indexed module of the installed TileLang against the module imported here: its
    ``__all__`` in order where it declares one, else only names the module really has."""
    import importlib
    import importlib.util

    here = installation_here()
    assert here is not None
    index, _ = build_source_index(Path(here.folder), here.version)
    modules = {m.name: m for m in index.modules}
    declared_seen = 0
    for name, module in modules.items():
        imported = importlib.import_module(name)
        entries = modules[module.same_as].entries if module.same_as else module.entries
        names = [e.name for e in entries]
        declared = getattr(imported, "__all__", None)
        if declared is not None:
            declared_seen += 1
            assert names == list(dict.fromkeys(declared)), name
        else:
            assert all(hasattr(imported, n) or importlib.util.find_spec(f"{name}.{n}") for n in names), name
    assert declared_seen >= 3  # tilelang.language, its CUDA twin, the Ascend dialect, tilelang.testing
