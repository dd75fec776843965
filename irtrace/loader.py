"""Load kernel files the way ``python path.py`` sees them and build their PrimFuncs.

A file is imported with its folder on ``sys.path`` (sibling helper modules import), or as part
of its package when it sits in one (relative imports work); its ``__main__`` block does not run.
Unsaved editor text is compiled under the document's file name and registered in ``linecache``
so TileLang's frontend, which reads kernel source through ``inspect``, sees it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import linecache
import sys
import traceback
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.errors import InputError, KernelSourceError, UsageError
from irtrace.specs import DtypeName, KernelSpec
from irtrace.targets import ASCEND, PORTABLE

PRIMFUNC = "primfunc"
JIT = "jit"
FACTORY = "factory"


@dataclass(frozen=True)
class KernelDefinition:
    """A kernel found in a module: a PrimFunc, a ``@tilelang.jit`` kernel or a factory."""

    name: str
    kind: str
    """``primfunc``, ``jit`` or ``factory``."""
    obj: Any = field(repr=False)
    line: int | None = None
    """1-based line of its definition, when known."""


@dataclass(frozen=True)
class LoadedModule:
    """An imported kernel file."""

    path: Path
    module: types.ModuleType = field(repr=False)
    dialect: str
    """``tilelang`` or ``ascend`` (``tilelang.ascend.language`` kernels)."""


def resolve_kernel_file(path: str | Path) -> Path:
    file = Path(path).expanduser()
    if not file.exists():
        raise InputError(f"kernel file {str(path)!r} does not exist")
    if file.is_dir():
        raise InputError(f"{str(path)!r} is a directory; give a .py file holding TileLang kernels")
    if file.suffix != ".py":
        raise InputError(f"{str(path)!r} is not a Python file; kernel files end in .py")
    return file.resolve()


def _package_root(file: Path) -> tuple[Path, str]:
    """The folder to put on ``sys.path`` and the module's dotted name."""
    parts = [file.stem]
    folder = file.parent
    while (folder / "__init__.py").exists() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def detect_dialect(module: types.ModuleType) -> str:
    """Ascend when the module uses ``tilelang.ascend.language``, else portable TileLang."""
    for value in vars(module).values():
        name = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else ""
        if name.startswith("tilelang.ascend"):
            return ASCEND
    return PORTABLE


def load_kernel_module(path: str | Path, text: str | None = None) -> LoadedModule:
    """Import a kernel file, or compile ``text`` as if it were that file's content.

    Errors raised while importing become ``KernelSourceError`` naming the file and line.
    """
    file = Path(path).expanduser().resolve() if text is not None else resolve_kernel_file(path)
    root, dotted = _package_root(file)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if text is None and dotted in sys.modules and getattr(sys.modules[dotted], "__file__", None) == str(file):
        # A fresh import each time: the file may have changed since.
        del sys.modules[dotted]
    try:
        if text is not None:
            module = _module_from_text(file, dotted, text)
        elif "." in dotted:
            module = importlib.import_module(dotted)
        else:
            module = _module_from_file(file, _free_module_name(dotted, file))
    except SyntaxError as error:
        where = f"{error.filename or file}:{error.lineno or 0}"
        raise KernelSourceError(f"{where}: syntax error: {error.msg}") from error
    except Exception as error:
        raise KernelSourceError(f"importing {file.name} raised {_describe(error, file)}") from error
    return LoadedModule(path=file, module=module, dialect=detect_dialect(module))


def _free_module_name(stem: str, file: Path) -> str:
    existing = sys.modules.get(stem)
    if existing is None or getattr(existing, "__file__", None) == str(file):
        return stem
    return f"_irtrace_kernel_{stem}"


def _module_from_file(file: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot import {str(file)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _module_from_text(file: Path, dotted: str, text: str) -> types.ModuleType:
    lines = text.splitlines(keepends=True)
    # mtime None: linecache.checkcache keeps the entry even though the file differs on disk.
    linecache.cache[str(file)] = (len(text), None, lines, str(file))
    module = types.ModuleType(dotted.rpartition(".")[2] if "." not in dotted else dotted)
    module.__file__ = str(file)
    if "." in dotted:
        module.__package__ = dotted.rpartition(".")[0]
    code = compile(text, str(file), "exec", dont_inherit=True)
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(module.__name__, None)
        raise
    return module


def _describe(error: BaseException, file: Path) -> str:
    """``TypeError: msg (at file.py:12)``, pointing at the deepest frame in the user's file."""
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if Path(frame.filename).resolve() == file:
            line = frame.lineno
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    where = f" (at {file.name}:{line})" if line else ""
    return f"{type(error).__name__}: {message}{where}"


def find_kernels(loaded: LoadedModule) -> list[KernelDefinition]:
    """Every PrimFunc, ``@tilelang.jit`` kernel and plain function defined in the module."""
    from tilelang.jit import JITImpl
    from tvm.tirx import PrimFunc

    found = []
    for name, value in vars(loaded.module).items():
        if name.startswith("__"):
            continue
        if isinstance(value, PrimFunc):
            found.append(KernelDefinition(name, PRIMFUNC, value, _primfunc_line(value)))
        elif isinstance(value, JITImpl):
            found.append(KernelDefinition(name, JIT, value, _line_of(getattr(value, "func", None))))
        elif inspect.isfunction(value) and value.__module__ == loaded.module.__name__:
            found.append(KernelDefinition(name, FACTORY, value, _line_of(value)))
    return found


def _line_of(obj: Any) -> int | None:
    target = getattr(obj, "orig_func", None) or getattr(obj, "func", None) or obj
    code = getattr(inspect.unwrap(target), "__code__", None) if callable(target) else None
    return code.co_firstlineno if code is not None else None


def _primfunc_line(func: Any) -> int | None:
    span = getattr(func, "span", None)
    line = getattr(span, "line", None) if span is not None else None
    return int(line) if line else None


def select_kernels(loaded: LoadedModule, spec: KernelSpec) -> list[KernelDefinition]:
    """The kernels a spec names; errors list what the file does define."""
    kernels = find_kernels(loaded)
    if spec.name is None:
        primfuncs = [k for k in kernels if k.kind == PRIMFUNC]
        if primfuncs:
            return primfuncs
        candidates = [k for k in kernels if k.kind in (JIT, FACTORY)]
        hint = ", ".join(f"{spec.path}::{k.name}(...)" for k in candidates[:6]) or "none"
        raise InputError(
            f"{spec.path} defines no module-level PrimFunc; name a factory or jit kernel, e.g. {hint}"
        )
    for kernel in kernels:
        if kernel.name == spec.name:
            return [kernel]
    names = ", ".join(f"{k.name} ({k.kind})" for k in kernels) or "nothing"
    value = getattr(loaded.module, spec.name, None)
    if value is not None:
        raise InputError(
            f"{spec.name!r} in {spec.path} is a {type(value).__name__}, not a kernel; kernels there: {names}"
        )
    raise InputError(f"{spec.path} has no kernel named {spec.name!r}; it defines: {names}")


def resolve_dtype(value: Any) -> Any:
    """Turn ``DtypeName`` placeholders into tilelang dtypes, recursively."""
    if isinstance(value, DtypeName):
        import tilelang.language as T

        dtype = getattr(T, value.name, None)
        if dtype is None:
            raise UsageError(
                f"{value} is not a TileLang dtype (try T.float16, T.bfloat16, T.float32, T.int8)"
            )
        return dtype
    if isinstance(value, (list, tuple)):
        return type(value)(resolve_dtype(v) for v in value)
    if isinstance(value, dict):
        return {k: resolve_dtype(v) for k, v in value.items()}
    return value


@dataclass
class BuiltKernel:
    """A PrimFunc ready to lower, with the pass configs its definition carries."""

    func: Any
    pass_configs: dict[str, Any]


@contextmanager
def _target_context(target: Any) -> Iterator[None]:
    if target is None:
        yield
    else:
        with target:
            yield


def build_primfunc(
    kernel: KernelDefinition,
    spec: KernelSpec,
    tvm_target: Any = None,
    file: Path | None = None,
) -> BuiltKernel:
    """Instantiate the kernel inside the target's context, as TileLang does at compile time.

    A factory or jit kernel that raises becomes a ``KernelSourceError`` naming the line.
    """
    from tvm.tirx import PrimFunc

    args = tuple(resolve_dtype(a) for a in spec.args)
    kwargs = {k: resolve_dtype(v) for k, v in spec.kwargs.items()}
    configs: dict[str, Any] = {}
    try:
        with _target_context(tvm_target):
            if kernel.kind == PRIMFUNC:
                if spec.called:
                    raise UsageError(f"{kernel.name} is a PrimFunc, not a factory; drop the call arguments")
                func = kernel.obj
            elif kernel.kind == JIT:
                func = kernel.obj.get_tir(*args, **kwargs)
                configs.update(dict(kernel.obj.pass_configs or {}))
            else:
                func = kernel.obj(*args, **kwargs)
                if not isinstance(func, PrimFunc) and _is_jit(func):
                    configs.update(dict(func.pass_configs or {}))
                    func = func.get_tir()
    except (UsageError, InputError):
        raise
    except Exception as error:
        call = f"{kernel.name}{spec.call_text}"
        raise KernelSourceError(f"building {call} raised {_describe(error, file or Path('?'))}") from error
    if not isinstance(func, PrimFunc):
        raise InputError(
            f"{kernel.name}{spec.call_text} returned {type(func).__name__}, not a PrimFunc; "
            "a factory must return a @T.prim_func"
        )
    if func.attrs is not None and "tilelang_pass_configs" in func.attrs:
        configs = {**dict(func.attrs["tilelang_pass_configs"]), **configs}
    return BuiltKernel(func=func, pass_configs=normalize_configs(configs))


def _is_jit(value: Any) -> bool:
    from tilelang.jit import JITImpl

    return isinstance(value, JITImpl)


def normalize_configs(configs: Mapping[Any, Any]) -> dict[str, Any]:
    """Pass-config keys as strings, the way TVM's ``PassContext`` wants them."""
    from tilelang.transform.pass_config import normalize_pass_configs

    return dict(normalize_pass_configs(dict(configs)))


def parse_pass_config(item: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line; VALUE is a literal or else a plain string."""
    import ast

    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"--pass-config {item!r}: write KEY=VALUE, e.g. tl.disable_warp_specialized=True")
    try:
        value: Any = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return key.strip(), value
