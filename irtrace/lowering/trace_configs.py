"""Pass configs read from a trace, decoded against the types TileLang registers with TVM.

A trace is data, and its ``pass_configs`` reach TVM's ``PassContext`` when ``repro``, ``reduce``
and ``resume`` lower its kernel again (and the scripts they write run them again). Each key must
be a config the installed TileLang/TVM registers (``PassContext.list_configs``), and its value
must be of that config's type: on/off and integer options take booleans or integers, float
options numbers, text options one word, structured options (``tl.Simplify``) an object of those.
Two kinds never pass silently:

- compile flags (``tl.device_compile_flags``) reach the device compiler's command line, which
  nvcc hands to a shell: they are dropped unless the user asks (``--trace-compile-flags``), and
  then each must be one plain flag (``COMPILE_FLAG``);
- options that only make TileLang write files (``tl.enable_dump_ir``, ``tl.dump_ir_path``,
  layout pictures) are always dropped: a trace names no file to write.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from irtrace.base.errors import InputError
from irtrace.trace.model import KernelRun

COMPILE_FLAG_KEYS = frozenset({"tl.device_compile_flags"})
"""Configs whose values TileLang puts on a compiler's command line."""
FILE_WRITING_KEYS = frozenset(
    {
        "tl.enable_dump_ir",
        "tl.dump_ir_path",
        "tl.layout_visualization_enable",
        "tl.layout_visualization_formats",
    }
)
"""Configs that only make TileLang write files (IR dumps, layout pictures) where they say."""
COMPILE_FLAG = re.compile(r"--?[A-Za-z0-9_][A-Za-z0-9_.,=+:/-]{0,199}")
"""One plain compiler flag: one or two dashes, then letters, digits and ``_.,=+:/-``; no space,
quote or shell metacharacter (``;``, ``$``, ``|``, ``&``, backquote, ``{}``, ``()``, ``<>``, ``*?``)."""
CONFIG_WORD = re.compile(r"[A-Za-z0-9_.,:+-]{0,200}")
"""A text config's value (``tl.layout_cost_model``, ``tl.enable_auto_warp_specialization``)."""
MAX_COMPILE_FLAGS = 64


class TraceConfigError(InputError):
    """A pass config from a trace is not of the type its registered config takes."""


@dataclass(frozen=True)
class TraceConfigs:
    """A trace's pass configs as TVM may receive them, and what was left out and why."""

    configs: dict[str, Any]
    dropped: list[str] = field(default_factory=list)
    """One line per config left out (``tl.dump_ir_path: writes files``)."""


def registered_config_types() -> dict[str, str]:
    """Each pass config TVM knows (TileLang's registered on import), with its type's name
    (``ir.IntImm``, ``ir.FloatImm``, ``str``, ``ffi.Array``, or a config node type)."""
    import tilelang  # noqa: F401  (registers TileLang's configs)
    import tvm

    return {
        str(key): str(dict(info).get("type"))
        for key, info in tvm.transform.PassContext.list_configs().items()
    }


def decode_trace_configs(
    configs: Mapping[str, Any], *, compile_flags: bool = False, where: str = "the trace"
) -> TraceConfigs:
    """``configs`` (a run's ``pass_configs``) decoded against the registered config types;
    compile flags kept only with ``compile_flags``, and then only plain flags."""
    types = registered_config_types()
    decoded: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in configs.items():
        if key not in types:
            dropped.append(f"{key}: not a pass config of the installed TileLang")
        elif key in FILE_WRITING_KEYS:
            dropped.append(f"{key}: only makes TileLang write files")
        elif key in COMPILE_FLAG_KEYS and not compile_flags:
            dropped.append(
                f"{key}: reaches the device compiler's command line (--trace-compile-flags keeps it)"
            )
        elif key in COMPILE_FLAG_KEYS:
            decoded[key] = _compile_flags(key, value, where)
        else:
            decoded[key] = _typed_value(key, value, types[key], where)
    return TraceConfigs(decoded, dropped)


def _compile_flags(key: str, value: Any, where: str) -> list[str]:
    flags = [value] if isinstance(value, str) else value
    if not isinstance(flags, list) or len(flags) > MAX_COMPILE_FLAGS:
        raise TraceConfigError(f"{key} in {where} is not a list of at most {MAX_COMPILE_FLAGS} flags")
    for flag in flags:
        if not (isinstance(flag, str) and COMPILE_FLAG.fullmatch(flag)):
            raise TraceConfigError(
                f"{key} in {where} holds {_show(flag)}, not one plain compiler flag (one or two dashes, "
                "then letters, digits and _.,=+:/- only); irtrace passes no flag of it"
            )
    return list(flags)


def _typed_value(key: str, value: Any, kind: str, where: str) -> Any:
    """``value`` when it is of the registered type ``kind``; else a ``TraceConfigError``."""
    if kind == "ir.IntImm" and isinstance(value, (bool, int)) and abs(int(value)) < 2**63:
        return value
    if kind == "ir.FloatImm" and isinstance(value, (int, float)) and math.isfinite(value):
        return value
    if kind == "str" and isinstance(value, str) and CONFIG_WORD.fullmatch(value):
        return value
    if kind == "ffi.Array" and isinstance(value, list) and all(_scalar(item) for item in value):
        return value
    if (
        "Config" in kind
        and isinstance(value, dict)
        and all(
            isinstance(name, str) and name.isidentifier() and _scalar(item) for name, item in value.items()
        )
    ):
        return value
    raise TraceConfigError(f"{key} in {where} is {_show(value)}, which is not a value of its type ({kind})")


def _scalar(value: Any) -> bool:
    if isinstance(value, str):
        return CONFIG_WORD.fullmatch(value) is not None
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (bool, int)) and abs(int(value)) < 2**63


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def run_with_trace_configs(run: KernelRun, *, compile_flags: bool) -> tuple[KernelRun, list[str]]:
    """``run`` with its pass configs decoded (``decode_trace_configs``), and what was left out."""
    import msgspec

    decoded = decode_trace_configs(run.pass_configs, compile_flags=compile_flags, where="the trace's run")
    return msgspec.structs.replace(run, pass_configs=decoded.configs), decoded.dropped
