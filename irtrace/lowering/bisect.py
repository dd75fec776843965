"""The recordings ``irtrace bisect`` compares: one kernel lowered once per pass option switched
(``configs``), or once per TileLang environment (``versions``, a Python interpreter each).

Comparing them (first differing pass, diffs) is passdiff's work, done in ``irtrace.cli.bisect``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtrace.base.errors import ExitCode, InputError, UsageError
from irtrace.targets.specs import KernelSpec
from irtrace.trace.model import KernelRun

NOT_SWITCHES = ("verbose", "debug", "dump", "emit_line_directives")
"""Options that only make TileLang print or write more (or annotate the source), never lower differently."""


def on_off_options() -> list[str]:
    """TileLang's pass options registered with TVM as integers (on/off), sorted."""
    import tilelang  # noqa: F401  (registers TileLang's options)
    import tvm

    registered = tvm.transform.PassContext.list_configs()
    return sorted(
        str(key)
        for key, info in registered.items()
        if str(key).startswith("tl.") and str(dict(info).get("type")) == "ir.IntImm"
    )


def switchable_pass_options() -> list[str]:
    """The options ``bisect configs`` switches by default: TileLang's ``PassConfigKey`` entries
    named ``tl.disable_*`` or ``tl.enable_*`` that TVM knows as on/off (declared but unregistered
    keys, and string-valued ones, would only fail the lowering), in TileLang's order."""
    from tilelang.transform import PassConfigKey

    on_off = set(on_off_options())
    return [
        str(key.value)
        for key in PassConfigKey
        if str(key.value) in on_off
        and str(key.value).startswith(("tl.disable_", "tl.enable_"))
        and not any(word in str(key.value) for word in NOT_SWITCHES)
    ]


def switched(configs: Mapping[str, Any], option: str) -> bool:
    """The value that switches ``option`` from what the base lowering used (off when unset)."""
    return not bool(configs.get(option, False))


def variant_name(kernel: str, option: str, value: object) -> str:
    """The kernel's name for one variant in the bisect trace: ``gemm[tl.disable_tma_lower=true]``."""
    return f"{kernel}[{option}={str(value).lower()}]"


def base_kernel_name(spec: KernelSpec) -> str:
    return spec.name or Path(spec.path).stem


# ----------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class EnvironmentRecording:
    """One environment's recording of the kernel: its trace, or why there is none."""

    python: str
    trace_path: Path | None
    """The trace written (with the run, failed or not); ``None`` when the environment gave none."""
    exit_code: int
    error: str | None
    """The last line the environment's ``irtrace record`` printed on stderr, when it failed."""


def package_root() -> Path:
    """The folder holding this ``irtrace`` package: put on the other interpreters' ``PYTHONPATH``
    so each environment runs this very recorder against its own TileLang."""
    return Path(__file__).resolve().parent.parent.parent


def check_interpreters(pythons: Sequence[str]) -> None:
    if len(pythons) < 2:
        raise UsageError("irtrace bisect versions: give at least two --python interpreters")
    for python in pythons:
        if not (Path(python).is_file() and os.access(python, os.X_OK)):
            raise InputError(f"--python {python!r} is not an executable file")


def record_in_environment(
    python: str, spec: str, target: str, output: Path, pass_configs: Sequence[str], timeout: float | None
) -> EnvironmentRecording:
    """Run ``irtrace record SPEC -t TARGET`` with ``python`` (its TileLang, this irtrace)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root()), env.get("PYTHONPATH")]))
    command = [python, "-m", "irtrace.cli", "record", spec, "-t", target, "-o", str(output), "-q"]
    for item in pass_configs:
        command += ["-c", item]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return EnvironmentRecording(python, None, ExitCode.LOWERING, f"timed out after {timeout:g} s")
    except OSError as error:
        return EnvironmentRecording(python, None, ExitCode.ENVIRONMENT, f"cannot run {python}: {error}")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    why = lines[-1] if done.returncode != 0 and lines else None
    if done.returncode != 0 and why is None:
        why = f"irtrace record exited {done.returncode}"
    return EnvironmentRecording(python, output if output.is_file() else None, done.returncode, why)


def version_key(run: KernelRun) -> tuple[int, ...]:
    """The run's TileLang release as numbers, for putting environments in release order."""
    numbers = []
    for part in run.tilelang_version.split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit())
        numbers.append(int(digits) if digits else 0)
    return tuple(numbers)
