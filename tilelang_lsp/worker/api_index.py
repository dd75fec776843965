"""TileLang's public API read from the installed package by introspection: ``build_api_index``.

The worker sends it once after ``Ready``; ``python -m tilelang_lsp.worker.api_index`` prints the
same ``ApiIndex`` line, which the server runs (with its own interpreter, nothing of the workspace on
``sys.path``) when the workspace is not trusted and no cached index fits. Nothing is hand-listed:
the names are each module's ``__all__`` (else its public attributes defined in tilelang or TVM).
"""

from __future__ import annotations

import importlib
import inspect
import linecache
import re
import sys
import time
import types
from typing import Any, Literal

from tilelang_lsp.protocol import ApiEntry, ApiIndex, ApiModule, ApiParameter, encode

MODULES = (
    "tilelang",
    "tilelang.language",
    "tilelang.jit",
    "tilelang.autotuner",
    "tilelang.profiler",
    "tilelang.layout",
    "tilelang.testing",
    "tilelang.transform",
    "tilelang.intrinsics",
    "tilelang.carver",
    "tilelang.cache",
    "tilelang.engine",
    "tilelang.tools",
    "tilelang.utils",
    "tilelang.contrib",
    "tilelang.math",
    "tilelang.cuda.language",
    "tilelang.ascend.language",
)
"""The modules TileLang's examples and tests import or reach through ``tilelang.``; one that
does not import in this installation is left out."""

DOC_LINES = 12
"""How much of a docstring completion and hover show (the whole text is one click away)."""

_DEFINITION = re.compile(r"\s*(async\s+def|def|class)\s")
_KINDS: dict[Any, Literal["positional", "keyword", "var_positional", "var_keyword"]] = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


def build_api_index(modules: tuple[str, ...] = MODULES) -> ApiIndex:
    """Every public name of ``modules`` with its kind, signature, doc and source line."""
    import tilelang

    began = time.perf_counter()
    found: list[ApiModule] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception:  # an optional backend missing here: that module is simply not offered
            continue
        entries = tuple(_entries(module))
        twin = next((m.name for m in found if m.entries == entries and m.same_as is None), None)
        if twin is not None:  # ``tilelang.cuda.language`` is what ``tilelang.language`` exports
            found.append(ApiModule(name=name, same_as=twin))
        else:
            found.append(ApiModule(name=name, entries=entries))
    folder = getattr(tilelang, "__path__", [""])[0]
    return ApiIndex(
        tilelang_version=str(getattr(tilelang, "__version__", "unknown")),
        folder=folder,
        modules=tuple(found),
        elapsed_s=time.perf_counter() - began,
    )


def _public_names(module: types.ModuleType) -> list[str]:
    listed = getattr(module, "__all__", None)
    if listed is not None:
        return sorted({str(n) for n in listed if hasattr(module, str(n))})
    names = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name, None)
        origin = value.__name__ if isinstance(value, types.ModuleType) else _defined_in(value)
        if origin.split(".")[0] in ("tilelang", "tvm", "tvm_ffi"):
            names.append(name)  # not ``os``, ``Path``, ``logger``: imports of the module itself
    return names


def _defined_in(value: object) -> str:
    if inspect.isclass(value) or inspect.isroutine(value):
        return str(getattr(value, "__module__", None) or "")
    return str(type(value).__module__ or "")


def _entries(module: types.ModuleType) -> list[ApiEntry]:
    entries = []
    for name in _public_names(module):
        try:
            entries.append(_entry(name, getattr(module, name)))
        except Exception:  # an attribute that fails to describe itself is left out, not fatal
            continue
    return entries


def _entry(name: str, value: object) -> ApiEntry:
    if isinstance(value, types.ModuleType):
        file, line = _source(value)
        return ApiEntry(
            name=name, kind="module", module=value.__name__, doc=_doc(value), file=file, line=line
        )
    kind: Literal["class", "function", "value"] = (
        "class" if inspect.isclass(value) else "function" if callable(value) else "value"
    )
    described = (
        value if kind != "value" and (inspect.isclass(value) or inspect.isroutine(value)) else type(value)
    )
    signature, parameters = _signature(value) if callable(value) else (None, ())
    if kind == "function" and not inspect.isroutine(value):
        kind = "value"  # a callable object (``T.Tensor``, ``T.float16``): shown as the value it is
    file, line = _source(described)
    return ApiEntry(
        name=name,
        kind=kind,
        signature=signature,
        parameters=parameters,
        doc=_doc(described),
        file=file,
        line=line,
    )


def _signature(value: Any) -> tuple[str | None, tuple[ApiParameter, ...]]:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None, ()
    parameters = tuple(
        ApiParameter(name=p.name, text=str(p), kind=_KINDS[p.kind]) for p in signature.parameters.values()
    )
    return str(signature), parameters


def _doc(value: object) -> str:
    text = inspect.getdoc(value) or ""
    lines = text.strip().splitlines()
    shown = "\n".join(lines[:DOC_LINES])
    return shown + ("\n…" if len(lines) > DOC_LINES else "")


def _source(value: Any) -> tuple[str | None, int | None]:
    """The file and the ``def``/``class`` line (past any decorators) of a definition."""
    try:
        unwrapped = inspect.unwrap(value) if callable(value) else value
        file = inspect.getsourcefile(unwrapped)
        if file is None:
            return None, None
        if isinstance(unwrapped, types.ModuleType):
            return file, 1
        lines = linecache.getlines(file)
        code = getattr(unwrapped, "__code__", None)
        if code is not None:
            start = code.co_firstlineno
        elif inspect.isclass(unwrapped):
            start = _class_line(lines, unwrapped.__name__)
        else:
            return file, None
    except (TypeError, OSError, ValueError):
        return None, None
    for index in range(start - 1, min(start + 40, len(lines))):
        if _DEFINITION.match(lines[index]):
            return file, index + 1
    return file, start


def _class_line(lines: list[str], name: str) -> int:
    """The line of ``class name`` in a file's lines, a top-level one first (``inspect`` parses
    the whole file for each class: seconds for TileLang's API)."""
    pattern = re.compile(rf"(\s*)class\s+{re.escape(name)}\b")
    found = [(len(m.group(1)) > 0, i) for i, text in enumerate(lines) if (m := pattern.match(text))]
    if not found:
        raise OSError(f"class {name} not found")
    return min(found)[1] + 1


def main() -> None:
    """Print the index as one protocol line; tilelang's own prints go to stderr."""
    protocol = sys.stdout.buffer
    sys.stdout = sys.stderr
    index = build_api_index()
    protocol.write(encode(index))
    protocol.flush()


if __name__ == "__main__":
    main()
