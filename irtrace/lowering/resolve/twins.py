"""CPU twins: the exact values of tensors a program makes on ``cuda`` from values known without a GPU,
kept beside the ``meta`` stand-ins, so ``.item()`` and friends answer what the GPU run computes.

Under the stand-ins a tensor asked for on ``cuda`` lives on PyTorch's ``meta`` device: a shape and a
dtype, no data. A program that sizes kernels from its own tensors (``cache_seqlens.max().item()``)
would stop there, though nothing random went into them. Rules (``docs/irtrace.md``, "Without a GPU"):

- a tensor made on ``cuda`` by a deterministic factory (``torch.tensor``/``as_tensor`` of data,
  ``arange``, ``zeros``, ``ones``, ``full``, ``eye``, ``linspace``, the ``*_like``/``new_*`` forms of
  those) or copied there from a CPU tensor (``.cuda()``, ``.to("cuda")``) gets a CPU twin holding its
  values; ``empty`` (no values) and random tensors (``randn``, ``normal_``..., or anything drawing on
  a random generator) never get one: the GPU's random stream is not the CPU's;
- a PyTorch operation whose every meta input has a twin runs on the twins too, and its results get
  them (a program's own function given to ``__torch_function__`` handling runs once, as written);
- a twin is forgotten when its tensor (or a view sharing its storage) changes in a way that was not
  computed on the twins (an in-place operation with a twinless input, a stand-in kernel's launch);
- twins are small: at most ``TWIN_ELEMENTS`` elements live in all, checked on the meta result's
  size before anything is computed; past that, tensors are meta only;
- ``item()``, ``tolist()``, ``int()``, ``float()``, ``bool()``, ``__index__``, ``.cpu()`` of a tensor with
  a twin answer the twin's values; ``bool()`` of a one-element tensor without a twin is ``True`` (a
  program's check of a stand-in result passes); ``.item()`` without a twin fails as PyTorch's meta
  device does (a value that would size a kernel is never guessed).

Values are PyTorch's CPU results: integer and boolean ones are exactly the GPU's; a floating-point
reduction or transcendental function may round differently from a GPU kernel in the last bit.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

META = "meta"
CPU = "cpu"
VALUES_NEEDED = "irtrace_values_needed"
"""Set on the error (to the call's name) where a call whose result is shaped by values
(``bincount``, ``nonzero``, ``x[mask]``) met a tensor without values (``no_gpu.why_values_stopped``
says so)."""

TWIN_ELEMENTS = 1 << 22
"""Live twin elements in all (at most 32 MiB of 8-byte values): a program's tensors past this stay
meta only, so a run costs little whatever the program allocates on its (absent) GPU."""

FACTORIES = frozenset(
    {
        "tensor",
        "as_tensor",
        "asarray",
        "scalar_tensor",
        "arange",
        "range",
        "zeros",
        "ones",
        "full",
        "eye",
        "linspace",
        "logspace",
        "tril_indices",
        "triu_indices",
        "zeros_like",
        "ones_like",
        "full_like",
        "new_tensor",
        "new_zeros",
        "new_ones",
        "new_full",
        "to",
        "cuda",
    }
)
"""Calls that make a tensor on ``cuda`` from values known without a GPU (their arguments)."""
VALUE_FREE = frozenset(
    {"zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "new_tensor"}
)
"""Calls whose values do not depend on their tensor input's values (only its shape, dtype)."""
RANDOM = frozenset(
    {
        "rand",
        "randn",
        "randint",
        "randperm",
        "rand_like",
        "randn_like",
        "randint_like",
        "normal",
        "normal_",
        "uniform_",
        "random_",
        "exponential_",
        "geometric_",
        "log_normal_",
        "cauchy_",
        "bernoulli",
        "bernoulli_",
        "multinomial",
        "poisson",
        "binomial",
        "dropout",
        "dropout_",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
        "native_dropout",
        "rrelu",
        "rrelu_",
        "gumbel_softmax",
    }
)
"""Calls that draw random numbers: never run on twins (the default generator's use is checked too)."""
VALUE_READS = frozenset(
    {
        "item",
        "tolist",
        "__bool__",
        "__int__",
        "__float__",
        "__complex__",
        "__index__",
        "__contains__",
        "__format__",
        "cpu",
        "to",
        "equal",
    }
)
"""Calls that read values, which the meta device cannot answer: a twin answers them."""
DATA_DEPENDENT = frozenset(
    {
        "nonzero",
        "argwhere",
        "masked_select",
        "unique",
        "unique_consecutive",
        "repeat_interleave",
        "bincount",
        "histc",
        "where",
        "__getitem__",
    }
)
"""Calls whose result's shape depends on values (``x[mask]``): the meta result is the twin's shape."""
IN_PLACE_DUNDERS = frozenset(
    {
        "__setitem__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
    }
)
ITEM_ON_META = "cannot be called on meta tensors"
"""PyTorch's meta error for a value read, also raised where an argument wants a number (a size)."""


@dataclass
class _Twin:
    value: torch.Tensor
    version: int | None
    """The meta tensor's version counter when ``value`` was last right (``None``: an inference
    tensor, which has none)."""
    storage: int
    """``value``'s storage (views of one tensor share it)."""


def func_name(func: Any) -> str:
    return str(getattr(func, "__name__", ""))


def torchs_own(func: Any) -> bool:
    """Whether ``func`` is PyTorch's (a tensor method, property or torch function): only those run
    twice (on meta and on the twins). A program's own function given to ``__torch_function__``
    handling runs once, as written."""
    module = getattr(func, "__module__", None)
    if isinstance(module, str):
        return module == "torch" or module.startswith("torch.")
    owner = getattr(func, "__objclass__", None)
    if owner is not None and owner is type(torch.Tensor.shape):  # a property's getter
        return True
    return owner is torch._C.TensorBase


def _is_meta(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == META


def _version(tensor: torch.Tensor) -> int | None:
    try:
        return int(tensor._version)
    except RuntimeError:  # inference tensors track none
        return None


def _storage(tensor: torch.Tensor) -> int:
    return int(tensor.untyped_storage().data_ptr())


class TwinRegistry:
    """The twins of this process's meta tensors (weakly held: a twin lives as long as its tensor).
    Each operation costs the registry work in proportion to its own tensors (and their views), never
    to all the twins alive."""

    def __init__(self, budget: int = TWIN_ELEMENTS) -> None:
        self.budget = budget
        self.live = 0
        """Elements of the twins alive now (a view counts again, an empty twin as one: over, never under)."""
        self._twins: Any = WeakIdKeyDictionary()  # by identity: a tensor's == compares values
        self._counted: set[int] = set()
        self._storage_users: dict[int, int] = {}
        """Live twins per storage: a storage's address is not reused while it has any."""
        self._stale: set[int] = set()
        """Storages changed where their twins could not follow: every twin on them is wrong."""
        self._views: dict[int, list[weakref.ref[torch.Tensor]]] = {}
        """The meta tensors whose twins use a storage."""

    def get(self, meta: Any) -> torch.Tensor | None:
        """``meta``'s twin, if it has one and it is still right."""
        if not _is_meta(meta):
            return None
        twin: _Twin | None = self._twins.get(meta)
        if twin is None:
            return None
        if twin.storage in self._stale or (twin.version is not None and _version(meta) != twin.version):
            self._twins.pop(meta, None)  # changed where no twin followed
            return None
        return twin.value

    def record(self, meta: torch.Tensor) -> _Twin | None:
        """``meta``'s twin record, right or not (an in-place operation's input, just after it)."""
        found: _Twin | None = self._twins.get(meta)
        return found

    def fits(self, elements: int) -> bool:
        return self.live + elements <= self.budget

    def set(self, meta: torch.Tensor, value: torch.Tensor) -> None:
        """Give ``meta`` the twin ``value`` (same shape and dtype), within the budget."""
        if value.shape != meta.shape or value.dtype != meta.dtype or value.device.type != CPU:
            self._twins.pop(meta, None)
            return
        if id(value) not in self._counted:
            if not self.fits(max(1, value.numel())):
                self._twins.pop(meta, None)
                return
            self._count(value)
        storage = _storage(value)
        old: _Twin | None = self._twins.get(meta)
        if old is None or old.storage != storage:
            views = self._views.setdefault(storage, [])
            views.append(weakref.ref(meta))
            if len(views) >= 64 and len(views) & (len(views) - 1) == 0:  # now and then: the dead go
                self._views[storage] = [view for view in views if view() is not None]
        self._twins[meta] = _Twin(value, _version(meta), storage)

    def _count(self, value: torch.Tensor) -> None:
        elements = max(1, value.numel())
        storage = _storage(value)
        self.live += elements
        self._counted.add(id(value))
        self._storage_users[storage] = self._storage_users.get(storage, 0) + 1
        weakref.finalize(value, self._release, id(value), elements, storage)

    def _release(self, key: int, elements: int, storage: int) -> None:
        self.live -= elements
        self._counted.discard(key)
        users = self._storage_users.get(storage, 1) - 1
        if users > 0:
            self._storage_users[storage] = users
        else:  # the storage is gone: its address may come back, fresh
            self._storage_users.pop(storage, None)
            self._stale.discard(storage)
            self._views.pop(storage, None)

    def forget(self, values: Any) -> None:
        """Forget the twins of the meta tensors in ``values`` and of every tensor sharing their
        twins' storage: something changed them that did not run on the twins (a stand-in kernel's
        launch writes its arguments on a GPU)."""
        with torch._C.DisableTorchFunction():  # called from the program's side too
            for leaf in _leaves(values):
                twin: _Twin | None = self._twins.get(leaf) if _is_meta(leaf) else None
                if twin is not None:
                    self._stale.add(twin.storage)
                    self._twins.pop(leaf, None)

    def keep_after_in_place(self, changed: dict[int, tuple[int, int]]) -> None:
        """After an in-place operation that ran on the twins too, ``changed`` being
        ``twin storage -> (version before, after)``: the tensors sharing that storage that were right
        just before are right after."""
        for storage, (before, after) in changed.items():
            alive = []
            for view in self._views.get(storage, []):
                meta = view()
                twin: _Twin | None = self._twins.get(meta) if meta is not None else None
                if meta is None or twin is None or twin.storage != storage:
                    continue
                alive.append(view)
                if twin.version == before:
                    twin.version = after
            self._views[storage] = alive


TWINS = TwinRegistry()
"""This process's twins (a run of a program is one process, or one forked child)."""


def _leaves(tree: Any) -> list[Any]:
    """The leaves of call arguments or results (tuples, lists, dicts), a slice's bounds included
    (``x[begin:end]`` with a tensor ``end``). Written out: ``torch.utils._pytree`` costs about as
    much as the meta operation itself."""
    leaves: list[Any] = []
    _collect(tree, leaves)
    return leaves


def _collect(value: Any, leaves: list[Any]) -> None:
    if isinstance(value, (tuple, list)):
        for item in value:
            _collect(item, leaves)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, leaves)
    elif isinstance(value, slice):
        leaves.extend((value.start, value.stop, value.step))
    else:
        leaves.append(value)


def _map_args(func: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with ``func`` applied to its leaves (as ``_leaves`` finds them), rebuilt alike."""
    if isinstance(tree, list):
        return [_map_args(func, item) for item in tree]
    if isinstance(tree, tuple):
        items = [_map_args(func, item) for item in tree]
        if type(tree) is tuple:
            return tuple(items)
        if hasattr(tree, "_fields"):  # a namedtuple
            return type(tree)(*items)
        return type(tree)(items)  # torch.Size, torch.return_types
    if isinstance(tree, dict):
        return {key: _map_args(func, item) for key, item in tree.items()}
    if isinstance(tree, slice):
        return slice(func(tree.start), func(tree.stop), func(tree.step))
    return func(tree)


def _metas(args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    return [leaf for leaf in _leaves((args, kwargs)) if _is_meta(leaf)]


def _has_generator(args: Any, kwargs: dict[str, Any]) -> bool:
    return any(isinstance(leaf, torch.Generator) for leaf in _leaves((args, kwargs)))


def _elements(result: Any) -> int:
    return sum(leaf.numel() for leaf in _leaves(result) if _is_meta(leaf))


def _on_cpu(value: Any, twins: dict[int, torch.Tensor], template: int | None) -> Any:
    """An argument as the twin computation takes it: meta tensors by their twins, ``meta``
    devices by ``cpu``; the twinless ``template`` (of ``zeros_like``, ``new_full``...: only its shape
    and dtype count) by an uninitialized CPU tensor."""
    if _is_meta(value):
        twin = twins.get(id(value))
        if twin is not None:
            return twin
        if id(value) == template:
            return torch.empty(value.shape, dtype=value.dtype, device=CPU)
        raise LookupError("a meta input without a twin")
    if _is_meta_device(value):
        return torch.device(CPU) if isinstance(value, torch.device) else CPU
    return value


def _cpu_call(
    func: Callable[..., Any],
    args: Any,
    kwargs: dict[str, Any],
    twins: dict[int, torch.Tensor | None],
    template: int | None = None,
) -> tuple[bool, Any]:
    """``func`` run on the twins (``twins``: meta tensor's id -> its twin, taken before the meta call
    changed any version): ``(True, result)``, or ``(False, None)`` where an input has no twin, the
    call failed on CPU or drew random numbers (the generator's state is put back, so the program's
    own CPU random stream is the one it would have)."""
    known = {key: twin for key, twin in twins.items() if twin is not None}
    try:
        cpu_args, cpu_kwargs = _map_args(lambda v: _on_cpu(v, known, template), (args, kwargs))
    except LookupError:
        return False, None
    state = torch.default_generator.get_state()
    drew = False
    try:
        result = func(*cpu_args, **cpu_kwargs)
    except Exception:
        return False, None
    finally:
        drew = not torch.equal(state, torch.default_generator.get_state())
        if drew:
            torch.default_generator.set_state(state)
    return (False, None) if drew else (True, result)


def _pair(meta_result: Any, cpu_result: Any, inputs: list[Any]) -> None:
    """Give each meta tensor of ``meta_result`` its twin from ``cpu_result`` (same structure)."""
    metas, cpus = _leaves(meta_result), _leaves(cpu_result)
    if len(metas) != len(cpus):
        return
    program_storages = {
        _storage(v) for v in inputs if isinstance(v, torch.Tensor) and v.device.type == CPU and v.numel()
    }
    for meta, value in zip(metas, cpus, strict=True):
        if _is_meta(meta) and isinstance(value, torch.Tensor):
            if value.numel() and _storage(value) in program_storages:
                value = value.clone()  # the program's own CPU tensor may change; its GPU copy would not
            TWINS.set(meta, value)


def _is_meta_device(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == META
    return isinstance(value, str) and value == META


def _is_cpu_device(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == CPU
    if isinstance(value, torch.Tensor):
        return value.device.type == CPU
    return isinstance(value, str) and value == CPU


def _made_on_gpu(name: str, args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the call makes its result on ``cuda`` (now ``meta``)."""
    if name == "to":
        return any(_is_meta_device(a) for a in args[1:]) or _is_meta_device(kwargs.get("device"))
    return _is_meta_device(kwargs.get("device"))


def _reads_values(name: str, args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the call reads a meta tensor's values (which the meta device cannot give)."""
    if not args or not _is_meta(args[0]):
        return False
    if name == "to":  # only a copy to the CPU reads values
        return any(_is_cpu_device(a) for a in args[1:]) or _is_cpu_device(kwargs.get("device"))
    if name == "__format__":  # PyTorch formats a 0-dim tensor by its value, others by their repr
        return bool(args[0].dim() == 0)
    return name in VALUE_READS


def call_with_twins(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``func`` as the meta stand-ins do (``cuda`` already made ``meta`` in the arguments), and
    keep the twins true (the module's docstring gives the rules)."""
    name = func_name(func)
    metas = _metas(args, kwargs)
    twins = {id(m): TWINS.get(m) for m in metas}
    if all(twin is None for twin in twins.values()) and not _may_make_twins(name, metas):
        try:
            return func(*args, **kwargs)  # no twin in, none to come out: the stand-ins as before twins
        except (RuntimeError, NotImplementedError) as error:
            _mark_values_needed(error, name)
            raise
    if not torchs_own(func):
        return _run_once(func, args, kwargs, metas, twins)
    if _reads_values(name, args, kwargs):
        answer = _value_read(func, name, args, kwargs, twins)
        if answer is not NotImplemented:
            return answer
    versions = {id(m): _version(m) for m in metas if twins[id(m)] is not None}
    try:
        result = func(*args, **kwargs)
    except (RuntimeError, NotImplementedError) as error:
        return _after_meta_failed(func, name, args, kwargs, twins, error)
    try:
        _mirror(func, name, args, kwargs, result, metas, twins, versions)
    except Exception:  # never the program's failure: its tensors are meta only from here
        TWINS.forget(metas)
    return result


def _may_make_twins(name: str, metas: list[torch.Tensor]) -> bool:
    """Whether a call without twinned inputs may still give a twin or a value: a factory (on no
    meta input), a value-free call (``zeros_like``), or ``bool()`` (a check that passes)."""
    return (not metas and name in FACTORIES) or name in VALUE_FREE or name == "__bool__"


def _run_once(
    func: Callable[..., Any],
    args: Any,
    kwargs: dict[str, Any],
    metas: list[torch.Tensor],
    twins: dict[int, torch.Tensor | None],
) -> Any:
    """A program's own function: run as written; the twins of the inputs it changed are forgotten."""
    versions = {id(m): _version(m) for m in metas if twins[id(m)] is not None}
    try:
        return func(*args, **kwargs)
    finally:
        changed = [m for m in metas if id(m) in versions and _version(m) != versions[id(m)]]
        if changed:
            TWINS.forget(changed)


def _after_meta_failed(
    func: Callable[..., Any],
    name: str,
    args: Any,
    kwargs: dict[str, Any],
    twins: dict[int, torch.Tensor | None],
    error: Exception,
) -> Any:
    """Where the meta device needs values: the twins' (the GPU has them), else the meta failure."""
    if ITEM_ON_META in str(error):
        # an argument wanting a number (a size, a fill value) got a 0-dim tensor: the GPU reads
        # its value; so does the twin, if it has one
        numbers = _map_args(_number_of_twin, (args, kwargs))
        if [id(m) for m in _metas(*numbers)] != [id(m) for m in _metas(args, kwargs)]:
            try:
                return call_with_twins(func, *numbers)
            except Exception:
                raise error from None
    if name in DATA_DEPENDENT and _all_twinned(twins):
        ran, value = _cpu_call(func, args, kwargs, twins)
        if ran and TWINS.fits(sum(v.numel() for v in _leaves(value) if isinstance(v, torch.Tensor))):
            result = _map_args(lambda v: v.to(META) if isinstance(v, torch.Tensor) else v, value)
            _pair(result, value, _leaves((args, kwargs)))
            return result
    _mark_values_needed(error, name)
    raise error


def _mark_values_needed(error: Exception, name: str) -> None:
    """Say on ``error`` that ``name``'s result is shaped by values its meta inputs do not have
    (``no_gpu.why_values_stopped`` tells the user so)."""
    if name in DATA_DEPENDENT:
        with contextlib.suppress(AttributeError):
            setattr(error, VALUES_NEEDED, name)


def _all_twinned(twins: dict[int, torch.Tensor | None]) -> bool:
    return bool(twins) and all(twin is not None for twin in twins.values())


def _number_of_twin(value: Any) -> Any:
    if _is_meta(value) and value.dim() == 0:
        twin = TWINS.get(value)
        if twin is not None:
            return twin.item()
    return value


def _value_read(
    func: Callable[..., Any],
    name: str,
    args: Any,
    kwargs: dict[str, Any],
    twins: dict[int, torch.Tensor | None],
) -> Any:
    """A value the meta device cannot give: the twin's, else ``True`` for ``bool()`` of one element
    (a check of a stand-in result passes), else ``NotImplemented`` (run on meta, it fails)."""
    if _all_twinned(twins):
        ran, value = _cpu_call(func, args, kwargs, twins)
        if ran:  # a CPU tensor handed to the program is its own, never a twin
            return _map_args(_copy_of, value)
    if name == "__bool__" and args[0].numel() == 1:
        return True
    return NotImplemented


def _mirror(
    func: Callable[..., Any],
    name: str,
    args: Any,
    kwargs: dict[str, Any],
    result: Any,
    metas: list[torch.Tensor],
    twins: dict[int, torch.Tensor | None],
    versions: dict[int, int | None],
) -> None:
    """After the meta call: run it on the twins where the rules allow, else forget the twins it
    changed."""
    inputs = _leaves((args, kwargs))
    mirrored = False
    random = name in RANDOM or _has_generator(args, kwargs)
    if not random and TWINS.fits(_elements(result)):
        if not metas and name in FACTORIES and _made_on_gpu(name, args, kwargs):
            ran, value = _cpu_call(func, args, kwargs, twins)
            if ran:  # a copy: ``as_tensor`` of a NumPy array shares its memory, a GPU copy would not
                _pair(result, _map_args(_copy_of, value), inputs)
                mirrored = True
        elif metas and (_all_twinned(twins) or name in VALUE_FREE):
            before = {id(m): TWINS.record(m) for m in metas}
            template = id(args[0]) if name in VALUE_FREE and args else None
            ran, value = _cpu_call(func, args, kwargs, twins, template)
            if ran:
                _pair(result, value, inputs)
                mirrored = True
                _keep_in_place_twins(metas, before, versions)
    if not mirrored:
        changed = [m for m in metas if id(m) in versions and _version(m) != versions[id(m)]]
        untracked = [m for m in metas if _version(m) is None]  # inference tensors
        if untracked and _may_change_inputs(name, kwargs):
            changed += untracked
        if changed:
            TWINS.forget(changed)


def _copy_of(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _keep_in_place_twins(
    metas: list[torch.Tensor], before: dict[int, Any], versions: dict[int, int | None]
) -> None:
    """An in-place operation ran on the twins as on meta: its inputs' twins (and their views'), right
    just before, are right after."""
    changed: dict[int, tuple[int, int]] = {}
    for meta in metas:
        old, new, twin = versions.get(id(meta)), _version(meta), before.get(id(meta))
        if twin is not None and old is not None and new is not None and new != old:
            changed[twin.storage] = (old, new)
    if changed:
        TWINS.keep_after_in_place(changed)


def _may_change_inputs(name: str, kwargs: dict[str, Any]) -> bool:
    """For tensors without a version counter (made in inference mode): whether the call may write
    its inputs."""
    in_place = name.endswith("_") and not name.startswith("__")
    return (
        in_place or name in IN_PLACE_DUNDERS or kwargs.get("out") is not None or bool(kwargs.get("inplace"))
    )


@contextlib.contextmanager
def budget(elements: int) -> Iterator[None]:
    """A smaller (or larger) twin budget for a while: tests."""
    saved = TWINS.budget
    TWINS.budget = elements
    try:
        yield
    finally:
        TWINS.budget = saved
