"""Load kernel files the way ``python path.py`` sees them and build their PrimFuncs.

A file is imported with its folder on ``sys.path`` (sibling helper modules import), or as part
of its package when it sits in one (relative imports work, also through folders without
``__init__.py``); its ``__main__`` block does not run. A spec may also name a module by its
dotted name, imported from the current folder. Unsaved editor text is compiled under the
document's file name and registered in ``linecache`` so TileLang's frontend, which reads kernel
source through ``inspect``, sees it. Spec arguments that are expressions are evaluated in the
kernel module's namespace (the module has been executed anyway).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import linecache
import math
import os
import re
import sys
import traceback
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from irtrace.base.errors import InputError, KernelSourceError, UsageError
from irtrace.facts.source_tree import compile_source, parse_source
from irtrace.lowering import frontend_lines
from irtrace.lowering.jit_abi import JitCompileArgs, as_jit_compiles
from irtrace.lowering.kernel_kinds import KernelKind
from irtrace.targets.backends import dialect_of_modules
from irtrace.targets.specs import DtypeName, Expression, KernelSpec
from irtrace.trace.schema import Instance


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


def package_root(file: Path, source: str | None = None) -> tuple[Path, str]:
    """The folder to put on ``sys.path`` and the module's dotted name.

    Folders with ``__init__.py`` are regular packages and always belong to the name. A module
    whose deepest relative import is ``from ..x import y`` (level 2) needs a package two levels
    deep, so that many folders join the name even without ``__init__.py``: Python imports them
    as namespace packages, as it would for ``python -m pkg.sub.module``.
    """
    depth = _relative_import_depth(file, source)
    parts = [file.stem]
    folder = file.parent
    while folder.parent != folder and folder.name.isidentifier():
        if not (folder / "__init__.py").exists() and len(parts) > depth:
            break
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def _relative_import_depth(file: Path, source: str | None) -> int:
    """The largest ``level`` of the module's relative imports (0 when none, or unreadable)."""
    try:
        text = source if source is not None else file.read_text(encoding="utf-8")
        tree = parse_source(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return 0
    levels = [node.level for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return max(levels, default=0)


def is_module_name(text: str) -> bool:
    """Whether a spec's path part is a dotted module name (``pkg.sub.module``) rather than a file."""
    return not text.endswith(".py") and all(part.isidentifier() for part in text.split("."))


def load_spec_module(spec_path: str, base_dir: Path | None = None) -> LoadedModule:
    """Load what a spec's path part names: a file (relative to ``base_dir`` if given), or else,
    when it is a dotted name that is no file, the module of that name imported from ``base_dir``
    or the current folder."""
    path = Path(spec_path).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.exists() or not is_module_name(spec_path):
        return load_kernel_module(path)
    return import_kernel_module(spec_path, base_dir or Path.cwd())


def import_kernel_module(name: str, root: Path) -> LoadedModule:
    """Import ``pkg.sub.module`` with ``root`` on ``sys.path``, the way ``python -m`` from there would."""
    root_text = str(root.resolve())
    if root_text not in sys.path:
        sys.path.insert(0, root_text)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (name == missing or name.startswith(missing + ".")):
            raise InputError(
                f"{name!r} is neither a file nor a module importable from {root_text} "
                f"(no module named {missing!r}); give path.py or pkg.module"
            ) from None
        raise KernelSourceError(f"importing {name} raised {_describe(error, _module_file(name))}") from error
    except SyntaxError as error:
        raise KernelSourceError(f"{error.filename}:{error.lineno or 0}: syntax error: {error.msg}") from error
    except Exception as error:
        raise KernelSourceError(f"importing {name} raised {_describe(error, _module_file(name))}") from error
    file = getattr(module, "__file__", None)
    if not file:
        raise InputError(f"{name!r} is a namespace package, not a module; name the module holding the kernel")
    return LoadedModule(path=Path(file).resolve(), module=module, dialect=detect_dialect(module))


def _module_file(name: str) -> Path:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    return Path(file).resolve() if file else Path(name.replace(".", os.sep) + ".py").resolve()


def detect_dialect(module: types.ModuleType) -> str:
    """Ascend when the module imported ``tilelang.ascend`` (``.language``), else portable TileLang."""
    modules = [value for value in vars(module).values() if isinstance(value, types.ModuleType)]
    return dialect_of_modules(str(value.__name__) for value in modules)


def load_kernel_module(path: str | Path, text: str | None = None) -> LoadedModule:
    """Import a kernel file, or compile ``text`` as if it were that file's content.

    Errors raised while importing become ``KernelSourceError`` naming the file and line.
    """
    file = Path(path).expanduser().resolve() if text is not None else resolve_kernel_file(path)
    root, dotted = package_root(file, text)
    frontend_lines.install()  # before the import: a module-level @T.prim_func is built by it
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


def source_as_imported(file: Path) -> str | None:
    """The kernel file's text as TileLang's frontend reads it (through ``linecache``: the editor's
    unsaved text, or the file as imported), for the trace to hold; ``None`` if unreadable."""
    linecache.checkcache(str(file))  # drops a cached copy of a file changed on disk, keeps unsaved text
    return "".join(linecache.getlines(str(file))) or None


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
    code = compile_source(text, str(file))  # from the tree the resolver read: no second parse
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
    """Every kernel the module defines, each as the first form in ``KERNEL_FORMS`` that takes it."""
    namespace = vars(loaded.module)
    found = []
    for name, value in namespace.items():
        if name.startswith("__"):
            continue
        for candidate in KERNEL_FORMS:
            form = candidate.form_of(value, loaded.module.__name__)
            if form is not None:
                found.append(form(name, value, form.line_of(value), namespace))
                break
    return found


def _line_of(obj: Any) -> int | None:
    target = getattr(obj, "orig_func", None) or getattr(obj, "func", None) or obj
    code = getattr(inspect.unwrap(target), "__code__", None) if callable(target) else None
    return code.co_firstlineno if code is not None else None


def select_kernels(loaded: LoadedModule, spec: KernelSpec) -> list[KernelDefinition]:
    """The kernels a spec names; errors list what the file does define."""
    kernels = find_kernels(loaded)
    if spec.name is None:
        primfuncs = [k for k in kernels if not k.kind.takes_arguments]
        if primfuncs:
            return primfuncs
        candidates = [k for k in kernels if k.kind.takes_arguments]
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
    compile_args: JitCompileArgs = field(default_factory=JitCompileArgs)
    """What the definition passes to TileLang's compile (``out_idx``, the execution backend)."""


@dataclass(frozen=True)
class KernelCall:
    """The arguments a kernel is instantiated with: the spec's, evaluated, and any filled in."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    autotune_defaults: dict[str, Any] = field(default_factory=dict)
    """Parameters the spec left out, taken from the first ``@autotune`` config."""
    pass_configs: dict[str, Any] = field(default_factory=dict)
    """The ``pass_configs`` entry of that config, when it was used."""

    def args_json(self) -> dict[str, Any]:
        """The trace header's ``args``: evaluated values in readable form (dtypes as ``T.name``)."""
        data: dict[str, Any] = {
            "args": [describe_value(a) for a in self.args],
            "kwargs": {k: describe_value(v) for k, v in self.kwargs.items()},
        }
        if self.autotune_defaults:
            data["autotune_defaults"] = {k: describe_value(v) for k, v in self.autotune_defaults.items()}
        return data


def describe_value(value: Any) -> Any:
    """A JSON value showing an argument: plain literals as they are, dtypes as ``T.name``,
    anything else as its ``repr`` (``torch.float16``)."""
    import tvm_ffi

    if isinstance(value, DtypeName):
        return str(value)
    if isinstance(value, tvm_ffi.dtype):
        return f"T.{value}"
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [describe_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): describe_value(v) for k, v in value.items()}
    text = repr(value)
    # repr() of a TVM object (a symbolic size) is a tvm_ffi String; one held in a run's args
    # after the object is gone crashed the process when freed, so keep an exact str.
    return text if type(text) is str else str.__new__(str, text)


# ----------------------------------------------------------------------------- kernel forms


@dataclass(frozen=True)
class KernelDefinition:
    """A kernel found in a module. One subclass per form TileLang offers holds what differs
    between them: how it is recognized, how its arguments are completed, how it is built. A new
    form is one class, added to ``KERNEL_FORMS`` (and its kind to ``KernelKind``)."""

    name: str
    obj: Any = field(repr=False)
    line: int | None = None
    """1-based line of its definition, when known."""
    namespace: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """The defining module's globals, where expression arguments are evaluated."""
    kind: ClassVar[KernelKind]

    @classmethod
    def form_of(cls, value: Any, module: str) -> type[KernelDefinition] | None:
        """The form (this class or a subclass) of ``value``, a global of module ``module``;
        ``None`` when it is not of this form."""
        return None

    @classmethod
    def line_of(cls, value: Any) -> int | None:
        """The 1-based line where ``value`` is defined, when known."""
        return _line_of(value)

    def complete_call(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], where: str, file: Path | None
    ) -> KernelCall:
        """The call with the spec's evaluated arguments, and any the form fills in itself."""
        return KernelCall(args, kwargs)

    def build(self, call: KernelCall, spec: KernelSpec) -> BuiltKernel:
        """The PrimFunc for ``call``, the pass configs the definition carries and what it passes
        to TileLang's compile (in the target's context, as TileLang builds at compile time)."""
        raise NotImplementedError

    def build_hint(self, error: Exception) -> str:
        """What to add to the message of an error building it: how to fix the spec."""
        return ""


@dataclass(frozen=True)
class PrimFuncKernel(KernelDefinition):
    """A module-level ``@T.prim_func``: built already, named without arguments."""

    kind = KernelKind.PRIM_FUNC

    @classmethod
    def form_of(cls, value: Any, module: str) -> type[KernelDefinition] | None:
        from tvm.tirx import PrimFunc

        return cls if isinstance(value, PrimFunc) else None

    @classmethod
    def line_of(cls, value: Any) -> int | None:
        line = getattr(getattr(value, "span", None), "line", None)
        return int(line) if line else None

    def build(self, call: KernelCall, spec: KernelSpec) -> BuiltKernel:
        if spec.called:
            raise UsageError(f"{self.name} is a PrimFunc, not a factory; drop the call arguments")
        return BuiltKernel(_fresh_global(self.namespace, self.name, self.obj), {})


@dataclass(frozen=True)
class JitKernel(KernelDefinition):
    """A ``@tilelang.jit`` kernel whose function builds an inner ``@T.prim_func`` (lazy style);
    it recognizes eager ones too, as ``EagerJitKernel``."""

    kind = KernelKind.JIT

    @classmethod
    def form_of(cls, value: Any, module: str) -> type[KernelDefinition] | None:
        from tilelang.jit import JITImpl

        if not isinstance(value, JITImpl):
            return None
        return EagerJitKernel if _is_eager(value) else JitKernel

    @classmethod
    def line_of(cls, value: Any) -> int | None:
        return _line_of(getattr(value, "func", None))

    def build(self, call: KernelCall, spec: KernelSpec) -> BuiltKernel:
        with _uncached(self.obj):
            func = self.obj.get_tir(*call.args, **call.kwargs)
        return BuiltKernel(func, dict(self.obj.pass_configs or {}), JitCompileArgs.of(self.obj))


@dataclass(frozen=True)
class EagerJitKernel(JitKernel):
    """A ``@tilelang.jit`` kernel that declares its tensors and ``T.const`` sizes in its body: a
    size the spec leaves out is the build error, and the hint says to give it by name."""

    kind = KernelKind.EAGER_JIT

    def build_hint(self, error: Exception) -> str:
        return _missing_size_hint(error, self.name)


@dataclass(frozen=True)
class AutotuneKernel(KernelDefinition):
    """An ``@autotune`` kernel: TileLang tunes over every config, a trace shows one, the spec's
    arguments with the rest from the first config, as if the user had passed them."""

    kind = KernelKind.AUTOTUNE

    @classmethod
    def form_of(cls, value: Any, module: str) -> type[KernelDefinition] | None:
        from tilelang.autotuner.tuner import AutoTuneImpl

        return cls if isinstance(value, AutoTuneImpl) else None

    @classmethod
    def line_of(cls, value: Any) -> int | None:
        return _line_of(getattr(value.jit_impl, "func", None))

    def complete_call(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], where: str, file: Path | None
    ) -> KernelCall:
        configs = self.obj.configs
        if callable(configs):
            try:
                configs = configs(*args, **kwargs)
            except Exception as error:
                raise KernelSourceError(
                    f"the @autotune configs function of {where} raised {_describe(error, file or Path('?'))}"
                ) from error
        try:
            first = next(iter(configs or ()), None)
        except TypeError:
            first = None
        if not isinstance(first, Mapping):
            raise InputError(
                f"{where}: its @autotune configs give no config to trace (expected a list of dicts, "
                f"got {type(configs).__name__}); pass every tunable argument in the spec instead"
            )
        parameters = list(self.obj.jit_impl.signature.parameters)
        given = set(parameters[: len(args)]) | set(kwargs)
        filled = {k: v for k, v in first.items() if k in parameters and k not in given}
        configs_entry = first.get("pass_configs") if filled else None
        return KernelCall(args, kwargs, filled, dict(configs_entry or {}))

    def build(self, call: KernelCall, spec: KernelSpec) -> BuiltKernel:
        jit = self.obj.jit_impl
        with _uncached(jit):
            func = jit.get_tir(*call.args, **{**call.kwargs, **call.autotune_defaults})
        return BuiltKernel(
            func, {**dict(jit.pass_configs or {}), **call.pass_configs}, JitCompileArgs.of(jit)
        )

    def build_hint(self, error: Exception) -> str:
        return _missing_size_hint(error, self.name) if _is_eager(self.obj.jit_impl) else ""


@dataclass(frozen=True)
class FactoryKernel(KernelDefinition):
    """A plain function of the module, called with the spec's arguments; it returns a PrimFunc or
    a ``@tilelang.jit`` kernel (built with no arguments). It may also be a helper, not a kernel."""

    kind = KernelKind.FACTORY

    @classmethod
    def form_of(cls, value: Any, module: str) -> type[KernelDefinition] | None:
        return cls if inspect.isfunction(value) and value.__module__ == module else None

    def build(self, call: KernelCall, spec: KernelSpec) -> BuiltKernel:
        from tilelang.jit import JITImpl

        func = self.obj(*call.args, **call.kwargs)
        if isinstance(func, JITImpl):
            return BuiltKernel(func.get_tir(), dict(func.pass_configs or {}), JitCompileArgs.of(func))
        return BuiltKernel(func, {})


@dataclass(frozen=True)
class CapturedKernel(KernelDefinition):
    """A module a script lowered itself (``irtrace run``), kept to lower again for other targets:
    built already, as the script built it, with the script's pass configs."""

    kind = KernelKind.CAPTURED
    pass_configs: dict[str, Any] = field(default_factory=dict)
    target: str = ""
    """The short name of the target the script lowered it for."""
    args: dict[str, Any] = field(default_factory=dict)
    """The script's call as a run's ``args`` (``{}`` when it was not a ``@tilelang.jit`` call)."""
    instance: Instance | None = None
    """Where and with what the script instantiated it."""
    function: Any = None
    """The ``GlobalVar`` of the module's function this kernel is: ``--bench`` finds it by identity,
    whatever name the run shows (a PrimFunc called ``main`` goes by its factory's name)."""
    launch_values: dict[str, Any] = field(default_factory=dict)
    """The integer and bool tensors the script's most frequent launch passed, by parameter
    (``irtrace.lowering.launches.KEPT_ELEMENTS``): ``--bench`` launches with these, not random ones."""

    @property
    def spec_text(self) -> str:
        """How its runs name their spec: there is no file and no call to repeat."""
        return f"captured:{self.name}"

    def build(self, call: KernelCall, spec: KernelSpec) -> BuiltKernel:
        return BuiltKernel(self.obj, dict(self.pass_configs))


KERNEL_FORMS: tuple[type[KernelDefinition], ...] = (
    PrimFuncKernel,
    AutotuneKernel,
    JitKernel,
    FactoryKernel,
)
"""The forms ``find_kernels`` looks for, in order: the first that takes a global wins (a plain
function last, since every kernel form wraps one)."""


# Lowering changes its PrimFunc in place (a thread variable is renamed), so a PrimFunc lowered
# twice, such as one TileLang's jit cache hands out for every target, shows what ran before it.
# Each run builds its own, as a fresh process would; no copy (a ``save_json`` round trip changed
# the generated source).


@contextmanager
def _uncached(jit: Any) -> Iterator[None]:
    """Build through an empty phase-1 cache of the ``@tilelang.jit`` function, then put its own back,
    so the PrimFunc is built anew instead of handed out again (the user's cache is left as it was)."""
    func = getattr(jit, "func", None)
    cache = getattr(func, "p1_cache", None)
    if not isinstance(cache, dict):
        yield
        return
    assert func is not None
    func.p1_cache = {}
    try:
        yield
    finally:
        func.p1_cache = cache


def _fresh_global(namespace: Mapping[str, Any] | None, name: str, current: Any) -> Any:
    """``name`` from a new execution of its module's code (the text TileLang's frontend reads), as a
    fresh process would define it; ``current`` when the module cannot be run again."""
    file = (namespace or {}).get("__file__")
    text = source_as_imported(Path(file)) if isinstance(file, str) else None
    if namespace is None or text is None:
        return current
    fresh: dict[str, Any] = {
        key: namespace[key] for key in ("__name__", "__file__", "__package__", "__spec__") if key in namespace
    }
    try:
        exec(compile_source(text, str(file)), fresh)
    except Exception:  # it ran once already; if it fails now, lower what that run defined
        return current
    return fresh.get(name, current)


def _is_eager(jit: Any) -> bool:
    """Whether a ``@tilelang.jit`` kernel is eager, as TileLang decides in ``auto`` mode without
    calling it: its function defines no inner ``@T.prim_func``."""
    from tilelang.language.eager import JITFunc
    from tilelang.language.eager.ast import has_internal_prim_func

    mode = getattr(jit, "mode", "auto")
    if mode in ("lazy", "eager"):
        return bool(mode == "eager")
    func = getattr(jit, "func", None)
    if not isinstance(func, JITFunc):
        return False
    try:
        return not has_internal_prim_func(func.orig_func)
    except Exception:  # its source cannot be read: TileLang would decide by calling it
        return False


def _missing_size_hint(error: Exception, name: str) -> str:
    """For an eager kernel's ``T.const`` size the spec did not give: how to give it."""
    match = re.search(r"constexpr variable `(\w+)`", str(error))
    return f"; give it by name: {name}({match[1]}=...)" if match else ""


def bind_call(kernel: KernelDefinition, spec: KernelSpec, file: Path | None = None) -> KernelCall:
    """Evaluate the spec's arguments for ``kernel``; call it inside the target's context, so a
    helper such as ``determine_fp8_type()`` sees the target.

    Expressions are evaluated in the kernel module's namespace: a name it does not define is a
    ``UsageError``, an expression that raises otherwise a ``KernelSourceError``. For an
    ``@autotune`` kernel, parameters the spec leaves out come from its first config.
    """
    namespace = kernel.namespace if kernel.namespace is not None else {}
    where = f"{kernel.name}{spec.call_text}"

    def evaluate(value: Any) -> Any:
        if isinstance(value, Expression):
            return _evaluate_expression(value, namespace, where, spec.path, file)
        if isinstance(value, (list, tuple)):
            return type(value)(evaluate(v) for v in value)
        if isinstance(value, dict):
            return {k: evaluate(v) for k, v in value.items()}
        return resolve_dtype(value)

    args = tuple(evaluate(a) for a in spec.args)
    kwargs = {k: evaluate(v) for k, v in spec.kwargs.items()}
    return kernel.complete_call(args, kwargs, where, file)


def _evaluate_expression(
    expression: Expression, namespace: Mapping[str, Any], where: str, module: str, file: Path | None
) -> Any:
    try:
        code = compile(expression.source, f"<argument {expression.source}>", "eval")
        # The module was executed to load the kernel; evaluating in it trusts nothing new.
        return eval(code, dict(namespace))
    except NameError as error:
        raise UsageError(f"argument {expression.source!r} of {where}: {error} in {module}") from None
    except SyntaxError as error:
        raise UsageError(f"argument {expression.source!r} of {where}: {error.msg}") from None
    except Exception as error:
        raise KernelSourceError(
            f"argument {expression.source!r} of {where} raised {_describe(error, file or Path('?'))}"
        ) from error


@contextmanager
def target_context(target: Any) -> Iterator[None]:
    """Enter a TVM target's context (nothing for ``None``), where factories run."""
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
    call: KernelCall | None = None,
) -> BuiltKernel:
    """Instantiate the kernel inside the target's context, as TileLang does at compile time, and
    give the PrimFunc TileLang's JIT would lower for that target (``as_jit_compiles``).

    ``call`` is the spec's arguments bound by ``bind_call`` (done here when not given). A
    factory or jit kernel that raises becomes a ``KernelSourceError`` naming the line.
    """
    from tvm.tirx import PrimFunc

    frontend_lines.install()
    with target_context(tvm_target):
        if call is None:
            call = bind_call(kernel, spec, file)
        try:
            built = kernel.build(call, spec)
        except (UsageError, InputError):
            raise
        except Exception as error:
            where = f"{kernel.name}{spec.call_text}"
            message = f"building {where} raised {_describe(error, file or Path('?'))}"
            raise KernelSourceError(message + kernel.build_hint(error)) from error
    func, configs = built.func, built.pass_configs
    if not isinstance(func, PrimFunc):
        raise InputError(
            f"{kernel.name}{spec.call_text} returned {type(func).__name__}, not a PrimFunc; "
            "a factory must return a @T.prim_func"
        )
    if func.attrs is not None and "tilelang_pass_configs" in func.attrs:
        configs = {**dict(func.attrs["tilelang_pass_configs"]), **configs}
    if tvm_target is not None:
        func = as_jit_compiles(func, built.compile_args, tvm_target, f"{kernel.name}{spec.call_text}")
    return BuiltKernel(func, normalize_configs(configs), built.compile_args)


def normalize_configs(configs: Mapping[Any, Any]) -> dict[str, Any]:
    """Pass-config keys as strings, the way TVM's ``PassContext`` wants them."""
    from tilelang.transform.pass_config import normalize_pass_configs

    return dict(normalize_pass_configs(dict(configs)))


_FLOAT_WORDS = {"inf", "+inf", "-inf", "nan", "+nan", "-nan"}


def parse_pass_config(item: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line, typed as the same value in a TOML manifest would be:
    ``true``/``false`` (any case) are booleans, numbers are ints or floats (``0x10``, ``1_000``,
    ``inf`` too), Python literals (``None``, ``'text'``, ``[1, 2]``) are their values, and
    anything else is a plain string."""
    key, sep, raw = item.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise UsageError(f"--pass-config {item!r}: write KEY=VALUE, e.g. tl.disable_warp_specialized=true")
    if not raw:
        raise UsageError(f"--pass-config {item!r}: no value after '='")
    if raw.lower() in ("true", "false"):
        return key, raw.lower() == "true"
    if raw.lower() in _FLOAT_WORDS:
        return key, float(raw)
    try:
        value: Any = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return key, raw
    if isinstance(value, tuple):
        value = list(value)
    # TOML has no complex numbers, bytes or sets: such text stays the string it was.
    return key, value if isinstance(value, (bool, int, float, str, list, dict, type(None))) else raw
