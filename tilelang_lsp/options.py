"""Initialization options: a dataclass with defaults; a bad value is reported and its default used."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from irtrace.core.targets import TARGETS
from tilelang_lsp.source import normalize_target


@dataclass
class InlayHintOptions:
    """Which parts of a buffer's facts inlay hints show."""

    shape: bool = True
    dtype: bool = True
    scope: bool = True
    layout: bool = True
    parameters: bool = True
    """Hints on kernel parameters (global tensors), not only on allocations."""


@dataclass
class InitializationOptions:
    """What a client may pass as ``initializationOptions`` (all optional)."""

    trusted: bool = False
    """Whether the workspace is trusted; analysis executes the user's module only when it is."""
    python: str | None = None
    """Interpreter for the worker (the user's environment); default: the server's own."""
    default_target: str = "cuda:sm_90"
    extra_targets: list[str] = field(default_factory=lambda: ["hip:gfx942"])
    """Targets analyzed in the background for side-by-side layouts in hover."""
    debounce_ms: int = 150
    """Quiet time after a burst of edits before analysis starts (a lone edit starts at once)."""
    analysis_timeout_s: float = 20.0
    """A worker request running longer is cut off: the worker is killed and restarted."""
    worker_memory_limit_mb: int = 6144
    """The worker is restarted once its resident memory grows past this."""
    hint_wait_s: float = 2.0
    """How long an inlay-hint request waits for the running analysis before answering from source."""
    background_delay_ms: int = 1000
    """Idle time after fresh hints before extra targets and the full lowering run (typing cancels them)."""
    summary: bool = True
    """Run the whole pipeline in the background for the code lens summary."""
    machine_code: bool = True
    """After the full lowering, compile CUDA kernels with nvcc (no GPU) for the code lens:
    registers, spills and shared memory, as ``irtrace record --machine-code`` does."""
    race_check: bool = True
    """Turn on TileLang's data-race check (off by default in TileLang itself)."""
    trace_dir: str = ".tilelang-lsp"
    """Where the trace command writes trace files, relative to the workspace."""
    inlay_hints: InlayHintOptions = field(default_factory=InlayHintOptions)


def parse_options(raw: Any) -> tuple[InitializationOptions, list[str]]:
    """Options from the client's JSON and the problems found; unknown keys are reported too."""
    options = InitializationOptions()
    problems: list[str] = []
    if raw is None:
        return options, problems
    if not isinstance(raw, dict):
        return options, [f"initializationOptions should be an object, got {type(raw).__name__}"]
    known = {f.name: f for f in dataclasses.fields(InitializationOptions)}
    aliases = {_camel(name): name for name in known}
    for key, value in raw.items():
        name = aliases.get(key, key)
        if name not in known:
            problems.append(f"unknown option {key!r}")
            continue
        default = getattr(options, name)
        if name == "inlay_hints":
            hints, hint_problems = _parse_hints(value)
            options.inlay_hints = hints
            problems.extend(hint_problems)
            continue
        checked = _check(name, value, default)
        if isinstance(checked, str) and checked.startswith("!"):
            problems.append(checked[1:])
        else:
            setattr(options, name, checked)
    return options, problems


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _check(name: str, value: Any, default: Any) -> Any:
    bad = f"!option {name}: {value!r} is not valid; using {default!r}"
    if name == "python":
        return value if value is None or isinstance(value, str) else bad
    if name == "default_target":
        target = normalize_target(value) if isinstance(value, str) else None
        return target if target in TARGETS else bad
    if name == "extra_targets":
        if not isinstance(value, list) or not all(isinstance(v, str) and normalize_target(v) for v in value):
            return bad
        return [normalize_target(v) for v in value]
    if isinstance(default, bool):
        return value if isinstance(value, bool) else bad
    if isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        return type(default)(value) if ok else bad
    if isinstance(default, str):
        return value if isinstance(value, str) and value else bad
    return bad


def _parse_hints(value: Any) -> tuple[InlayHintOptions, list[str]]:
    hints = InlayHintOptions()
    if not isinstance(value, dict):
        return hints, [f"option inlay_hints: {value!r} should be an object; using the defaults"]
    problems = []
    for key, flag in value.items():
        if not hasattr(hints, key):
            problems.append(f"unknown inlay hint kind {key!r}")
        elif not isinstance(flag, bool):
            problems.append(f"inlay hint kind {key!r} should be true or false")
        else:
            setattr(hints, key, flag)
    return hints, problems
