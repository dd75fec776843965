"""Initialization options: typed Structs with defaults, decoded option by option with msgspec.

A value of the wrong type, out of range or naming no known target is reported (the option, the
value, what it takes) and the default used; one bad option never costs the others, nor the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from irtrace.targets.backends import DEFAULT_TARGET, TARGETS, known_target_name

NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0)]


class InlayHintOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Which parts of a buffer's facts inlay hints show."""

    shape: bool = True
    dtype: bool = True
    scope: bool = True
    layout: bool = True
    parameters: bool = True
    """Hints on kernel parameters (global tensors), not only on allocations."""


class InitializationOptions(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What a client may pass as ``initializationOptions`` (all optional; camelCase or snake_case)."""

    trusted: bool = False
    """Whether the workspace is trusted; analysis executes the user's module only when it is."""
    python: str | None = None
    """Interpreter for the worker (the user's environment); default: the server's own."""
    default_target: str = DEFAULT_TARGET
    extra_targets: tuple[str, ...] = ("hip:gfx942",)
    """Targets analyzed in the background for side-by-side layouts in hover."""
    debounce_ms: NonNegativeInt = 150
    """Quiet time after a burst of edits before analysis starts (a lone edit starts at once)."""
    analysis_timeout_s: NonNegativeFloat = 20.0
    """A worker request running longer is cut off: the worker is killed and restarted."""
    worker_memory_limit_mb: NonNegativeInt = 6144
    """The worker is restarted once its resident memory grows past this."""
    hint_wait_s: NonNegativeFloat = 2.0
    """How long an inlay-hint request waits for the running analysis before answering from source."""
    background_delay_ms: NonNegativeInt = 1000
    """Idle time after fresh hints before extra targets and the full lowering run (typing cancels them)."""
    summary: bool = True
    """Run the whole pipeline in the background for the code lens summary."""
    machine_code: bool = True
    """After the full lowering, compile CUDA kernels with nvcc (no GPU) for the code lens:
    registers, spills and shared memory, as ``irtrace record --machine-code`` does."""
    race_check: bool = True
    """Turn on TileLang's data-race check (off by default in TileLang itself)."""
    trace_dir: Annotated[str, msgspec.Meta(min_length=1)] = ".tilelang-lsp"
    """Where the trace command writes trace files, relative to the workspace."""
    inlay_hints: InlayHintOptions = msgspec.field(default_factory=InlayHintOptions)
    instance_traces: tuple[str, ...] = ()
    """Trace files (``irtrace run``, ``IRTRACE=...``) whose recorded kernel instances are analyzed,
    relative to the workspace; default: ``irtrace.jsonl`` and ``.irtrace/*.jsonl`` there."""


class BadValue(ValueError):
    """A value of the right type that the option does not take; the text says what it takes."""


def _known_target(value: str) -> str:
    target = known_target_name(value)
    if target not in TARGETS:
        known = ", ".join(TARGETS)
        raise BadValue(f"{_shown(value)} is not a known target; one of {known}, or an alias (cuda, hip)")
    return target


def _known_targets(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_known_target(value) for value in values)


_CHECKS: dict[str, Callable[[Any], Any]] = {"default_target": _known_target, "extra_targets": _known_targets}
"""Checks past the type, which normalize the value (target aliases to target names)."""


def parse_options(raw: Any) -> tuple[InitializationOptions, list[str]]:
    """Options from the client's JSON and the problems found; unknown keys are reported too."""
    if raw is None:
        return InitializationOptions(), []
    if not isinstance(raw, dict):
        return InitializationOptions(), [
            f"initializationOptions should be an object, got {type(raw).__name__}"
        ]
    return _decode(InitializationOptions, raw, "")


def _decode(kind: type[Any], raw: dict[Any, Any], prefix: str) -> tuple[Any, list[str]]:
    """``kind`` from ``raw`` one field at a time: what decodes is kept, the rest reported."""
    fields = {f.name: f for f in msgspec.structs.fields(kind)}
    names = {**{f.encode_name: f.name for f in fields.values()}, **{name: name for name in fields}}
    accepted: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        name = names.get(key) if isinstance(key, str) else None
        if name is None:
            known = ", ".join(f.encode_name for f in fields.values())
            problems.append(f"unknown option {_shown(f'{prefix}{key}')} (known: {known})")
            continue
        field = fields[name]
        label = f"{prefix}{field.encode_name}"
        if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
            if not isinstance(value, dict):
                problems.append(f"option {label}: {_shown(value)} should be an object; using the defaults")
                continue
            accepted[name], inner = _decode(field.type, value, f"{label}.")
            problems.extend(inner)
            continue
        try:
            checked = msgspec.convert(value, type=field.type)
            accepted[name] = _CHECKS[name](checked) if name in _CHECKS else checked
        except (msgspec.ValidationError, BadValue) as error:
            why = str(error)
            why = why[:1].lower() + why[1:]
            default = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
            problems.append(f"option {label}: {_shown(value)} is not valid ({why}); using {_shown(default)}")
    return kind(**accepted), problems


def _shown(value: Any) -> str:
    """A value as JSON, as the client wrote it, cut short (it is the client's text)."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
