"""The forms a TileLang kernel takes, named once for every tool.

``irtrace.lowering.loader`` holds one class per form (how it is found in a module, built and
its arguments completed); readers that must not import tilelang, such as the language server's
source scan, ask this enum what a form implies. This module does not import tilelang.
"""

from __future__ import annotations

from enum import Enum


class KernelKind(str, Enum):
    """A kernel's form; the value is how traces, errors and summaries write it (and equal to it)."""

    PRIM_FUNC = "primfunc"
    """A module-level ``@T.prim_func``: built already, takes no arguments."""
    FACTORY = "factory"
    """A plain function that returns a PrimFunc (or a ``@tilelang.jit`` kernel)."""
    JIT = "jit"
    """A ``@tilelang.jit`` function that builds an inner ``@T.prim_func`` (lazy style)."""
    EAGER_JIT = "eager-jit"
    """A ``@tilelang.jit`` function that declares its tensors and ``T.const`` sizes in the body."""
    AUTOTUNE = "autotune"
    """An ``@autotune`` kernel over a ``@tilelang.jit`` one: traced with its first config."""
    CAPTURED = "captured"
    """A module a script lowered itself, captured by ``irtrace run``."""

    def __str__(self) -> str:
        return self.value

    @property
    def takes_arguments(self) -> bool:
        """Whether a spec calls it with arguments (``name(args)``) rather than naming it bare."""
        return self not in (KernelKind.PRIM_FUNC, KernelKind.CAPTURED)

    @property
    def tunes(self) -> bool:
        """Whether parameters the arguments leave out come from its first ``@autotune`` config."""
        return self is KernelKind.AUTOTUNE

    @property
    def may_be_helper(self) -> bool:
        """Whether a function of this kind found in a module may be a helper rather than a kernel
        (a plain function: only its source shows whether it builds a PrimFunc)."""
        return self is KernelKind.FACTORY

    @property
    def sizes_by_name(self) -> bool:
        """Whether its sizes are ``T.const`` declarations in the body, given by name, and its tensor
        parameters take no value."""
        return self is KernelKind.EAGER_JIT
