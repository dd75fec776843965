"""Which run a pool of workers starts first: the longest first (``irtrace record --jobs N``).

A pool that starts a long kernel last waits for it alone at the end. Longest-processing-time
order needs each run's time: from a previous trace (``--order-from``, or the output file a
previous recording left) where it has the run, else a static estimate by target family. Only the
order of starting changes; the trace is still written in the plan's order.
"""

from __future__ import annotations

import gzip
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from irtrace.base.errors import InputError, TraceFormatError
from irtrace.base.output import describe_os_error

RunKey = tuple[str, str, str]
"""``(kernel, spec, target)``: what a run is, as its trace header names it."""

TARGET_WEIGHTS: dict[str, float] = {
    "cuda": 1.0,
    "hip": 0.8,
    "metal": 0.25,
    "webgpu": 0.2,
    "ascend": 0.2,
    "c": 0.1,
    "llvm": 0.1,
}
"""Relative lowering time by target family when no previous time is known: the means of
``ci/examples.baseline.jsonl.gz`` per family, rounded (CUDA and HIP run the longest pipelines)."""

_HEADER = b'{"record":"header",'
_RUN = b'{"record":"run",'
_END = b'{"record":"end",'


class _Header(msgspec.Struct):
    run: int
    kernel: str
    spec: str
    target: str


class _End(msgspec.Struct):
    run: int
    total_s: float | None = None


def previous_run_times(path: str | os.PathLike[str]) -> dict[RunKey, float]:
    """Each ended run's ``total_s`` in the trace at ``path``; a run recorded twice keeps the last.

    Reads only the run and end lines (IR texts, most of a trace, are not decoded): this runs in
    the parent before any worker starts. Raises ``InputError`` or ``TraceFormatError``.
    """
    try:
        data = Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        message = describe_os_error(error) if isinstance(error, OSError) else str(error)
        raise InputError(f"cannot read {str(path)!r}: {message}") from None
    if not data.startswith(_HEADER):
        raise TraceFormatError(f"{path}: not an irtrace trace (it does not begin with a trace header)")
    headers: dict[int, RunKey] = {}
    times: dict[RunKey, float] = {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            if line.startswith(_RUN):
                header = msgspec.json.decode(line, type=_Header)
                headers[header.run] = (header.kernel, header.spec, header.target)
            elif line.startswith(_END):
                end = msgspec.json.decode(line, type=_End)
                if end.run in headers and end.total_s is not None:
                    times[headers[end.run]] = end.total_s
        except msgspec.DecodeError as error:
            raise TraceFormatError(f"{path}:{number}: not a trace line: {error}") from None
    return times


def static_estimate(target: str) -> float:
    """A run's relative time from its target's family alone (``cuda:sm_90`` -> ``cuda``)."""
    return TARGET_WEIGHTS.get(target.split(":", 1)[0], 0.5)


def longest_first(keys: Sequence[RunKey], times: Mapping[RunKey, float]) -> list[int]:
    """Indices of ``keys`` ordered by estimated time, longest first; equal estimates keep their order.

    A run in ``times`` takes its time there. One not there takes its target's static weight,
    scaled by the median known time so that both kinds of estimate compare.
    """
    known = [times[key] for key in keys if key in times]
    scale = statistics.median(known) if known else 1.0
    estimates = [times[key] if key in times else static_estimate(key[2]) * scale for key in keys]
    return sorted(range(len(keys)), key=lambda index: -estimates[index])
