"""``IRTRACE=out.jsonl``: capture the kernels every Python process lowers, with no wrapper command.

The startup hook ``irtrace-autocapture.pth`` (installed into site-packages with the package) calls
``start_from_environment`` in each Python process whose environment sets ``IRTRACE``, so the
capture reaches whatever starts Python: pytest and its xdist workers, torchrun, ``python -m``,
shell scripts. Every process that lowers a kernel writes its own part file (``ProcessCapture``);
the first process of a session (the root) merges the parts into the trace when it exits. See
docs/capture.md.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from irtrace.lowering.capture import ProcessCapture
    from irtrace.trace.model import KernelRun

OUTPUT_VARIABLE = "IRTRACE"
"""The trace to write; set (non-empty) it turns capture on in every Python process."""
SESSION_VARIABLE = "IRTRACE_SESSION"
"""Set by the root for its descendants: the name of the session whose parts they write."""
PARTS_SUFFIX = ".parts"
"""``out.jsonl.parts/SESSION/`` holds a session's part files until they are merged."""
ROOT_GRACE_S = 2.0
"""How long the root waits at exit for processes of its session still writing (xdist workers and
launched ranks end a moment after their launcher is told they ended)."""
_SESSION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")

_STARTED = False
"""The hook ran in this process (a site folder seen twice runs the .pth twice)."""


class AutoCaptureError(Exception):
    """Why this process runs without capture, in one line for the user."""


def warn(message: str) -> None:
    """One line on stderr; a closed or broken stderr must not break the user's program."""
    with contextlib.suppress(Exception):
        print(f"irtrace: warning: {message}", file=sys.stderr, flush=True)


def start_from_environment() -> None:
    """Called at Python startup by the .pth. Does nothing unless ``IRTRACE`` is set; never raises."""
    global _STARTED
    if _STARTED or not os.environ.get(OUTPUT_VARIABLE):
        return
    _STARTED = True
    try:
        _start(os.environ.get(SESSION_VARIABLE))
    except AutoCaptureError as error:
        warn(f"{error}; this program runs without capture")
    except Exception as error:  # a bug here must cost the capture only, never the user's program
        warn(f"capture is off in process {os.getpid()}: {type(error).__name__}: {error}")


def parts_root(output: Path) -> Path:
    """Where the sessions writing ``output`` keep their part files."""
    return output.with_name(output.name + PARTS_SUFFIX)


def _start(session: str | None) -> None:
    from irtrace.base.errors import OutputError
    from irtrace.base.output import output_target

    value = os.environ[OUTPUT_VARIABLE]
    is_root = session is None
    if is_root:
        try:
            output = output_target(Path(value).expanduser().absolute())
        except OutputError as error:
            os.environ.pop(OUTPUT_VARIABLE, None)  # the descendants run uncaptured too, silently
            raise AutoCaptureError(f"{OUTPUT_VARIABLE}={value!r}: {error}") from None
        session = f"{time.time_ns()}-{os.getpid()}"
    else:
        output = Path(value)
        if not output.is_absolute() or session is None or not _SESSION_NAME.fullmatch(session):
            raise AutoCaptureError(
                f"{SESSION_VARIABLE}={session!r} with {OUTPUT_VARIABLE}={value!r} is not a session irtrace "
                f"started (a session is a file name; {OUTPUT_VARIABLE} an absolute path)"
            )
    folder = parts_root(output) / session
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if is_root:
            os.environ.pop(OUTPUT_VARIABLE, None)
        raise AutoCaptureError(
            f"{OUTPUT_VARIABLE}={value!r}: cannot make {str(folder)!r}: {error.strerror or error}"
        ) from None
    if is_root:
        # Descendants may change folder, and must join this session rather than start their own.
        os.environ[OUTPUT_VARIABLE] = str(output)
        os.environ[SESSION_VARIABLE] = session
        atexit.register(_finish_root, output, folder, os.getpid())
    # As under `irtrace run`: a kernel served from TileLang's cache lowers nothing to capture.
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    owner = os.getpid() if is_root else 0  # 0: no process is this one's owner, so it writes a part
    if "tilelang" in sys.modules:
        _capture_this_process(output, folder, owner)
    else:  # importing TileLang takes seconds: only the processes that import it pay for capture
        sys.meta_path.insert(0, _WhenTileLangLoads(output, folder, owner))


_PROCESS_CAPTURE: ProcessCapture | None = None


def _capture_this_process(output: Path, folder: Path, owner: int) -> None:
    global _PROCESS_CAPTURE
    from irtrace.lowering.capture import start_part_capture

    try:
        capture = start_part_capture(folder, owner)
    except Exception as error:  # TileLang without instrumentation, a folder removed meanwhile...
        warn(f"kernels lowered in process {os.getpid()} are not captured: {error}")
        return
    _PROCESS_CAPTURE = capture
    if owner == os.getpid():
        root_pid = owner
        # ``os._exit`` skips atexit: the root ends its part and merges on the way out.
        capture.on_os_exit = lambda status: _finish_root(output, folder, root_pid, status)


class _WhenTileLangLoads(importlib.abc.MetaPathFinder):
    """Starts this process's capture right after ``import tilelang`` has run."""

    def __init__(self, output: Path, folder: Path, owner: int) -> None:
        self.output, self.folder, self.owner = output, folder, owner

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "tilelang":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the finders after this one, as Python would ask them
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module
        output, folder, owner = self.output, self.folder, self.owner

        def exec_then_capture(module: ModuleType) -> None:
            run_module(module)
            _capture_this_process(output, folder, owner)

        loader.exec_module = exec_then_capture  # type: ignore[method-assign]
        return spec


# ----------------------------------------------------------------------------- merging parts


@dataclass
class Collected:
    """What folding part files into a trace did."""

    runs: list[KernelRun] = field(default_factory=list)
    """The runs merged from the parts (as numbered in the trace written)."""
    processes: int = 0
    """How many part files (processes) were merged."""
    written: bool = False
    running: list[Path] = field(default_factory=list)
    """Parts whose process still runs: left where they are."""
    warnings: list[str] = field(default_factory=list)


def collect_parts(
    output: Path, folders: Sequence[Path], *, keep_existing: bool, grace_s: float = 0.0
) -> Collected:
    """Merge the part files in ``folders`` whose process has ended into ``output`` (through
    ``NAME.partial``), then remove them. With ``keep_existing`` the runs already in ``output``
    come first; else ``output`` is replaced. Parts still locked by a live process are left; a part
    that cannot be read is left with a warning. ``output`` is not touched if no part had a run."""
    from irtrace.base.errors import TraceFormatError
    from irtrace.lowering.capture import _is_locked
    from irtrace.trace.model import STATUS_INCOMPLETE
    from irtrace.trace.reader import load_trace
    from irtrace.trace.writer import write_merged

    result = Collected()
    parts = sorted((part for folder in folders for part in _part_files(folder)), key=lambda p: p.name)
    deadline = time.monotonic() + grace_s
    while any(_is_locked(part) for part in parts) and time.monotonic() < deadline:
        time.sleep(0.05)
    traces, merged = [], []
    for part in parts:
        pid = part.stem.rpartition("-")[2]
        if _is_locked(part):
            result.running.append(part)
            continue
        try:
            trace = load_trace(part)
        except TraceFormatError as error:
            result.warnings.append(
                f"the runs of process {pid} cannot be read, so they stay in {part}: {error}"
            )
            continue
        if any(run.status == STATUS_INCOMPLETE for run in trace.runs):
            result.warnings.append(f"process {pid} ended while lowering; its last run is kept, cut short")
        traces.append(trace)
        merged.append(part)
    if any(trace.runs for trace in traces):
        earlier = 0
        if keep_existing and output.exists():
            traces.insert(0, load_trace(output))
            earlier = len(traces[0].runs)
        result.runs = list(write_merged(traces, output).runs)[earlier:]
        result.written = True
    for part in merged:
        with contextlib.suppress(OSError):
            if _is_regular(part):  # still the part file it read, not a link put there since
                part.unlink()
    result.processes = len(merged)
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only once empty
    with contextlib.suppress(OSError):
        parts_root(output).rmdir()
    return result


def session_folders(output: Path) -> list[Path]:
    """Every session's part folder for ``output``, oldest first (session names start with the time).
    Only real folders count: a symbolic link (to the folder, or to a session in it) is never
    followed, so collecting cannot merge and delete traces in a folder a link points to."""
    root = parts_root(output)
    if not _is_folder(root):
        return []
    return sorted((path for path in root.iterdir() if _is_folder(path)), key=lambda path: path.name)


def _part_files(folder: Path) -> list[Path]:
    """The part files of a session folder: regular ``*.jsonl`` files, never a link to one."""
    if not _is_folder(folder):
        return []
    return [part for part in folder.glob("*.jsonl") if _is_regular(part)]


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _finish_root(output: Path, folder: Path, root_pid: int, status: int = 0) -> int:
    """At the root's exit: end its own part, then merge the session's ended parts into the trace.
    Never raises and never changes the exit status (it is returned as given)."""
    if os.getpid() != root_pid:  # a forked child inherits the root's atexit handlers
        return status
    try:
        capture = _PROCESS_CAPTURE
        if capture is not None:
            capture.finish_child()
            if capture.lock is not None:  # our own lock would make our part look still written
                os.close(capture.lock)
                capture.lock = None
        _report(output, collect_parts(output, [folder], keep_existing=False, grace_s=ROOT_GRACE_S))
    except Exception as error:
        warn(f"the captured runs were not merged into {str(output)!r}: {error}; they stay in {str(folder)!r}")
    return status


def _report(output: Path, collected: Collected) -> None:
    for message in collected.warnings:
        warn(message)
    if collected.written:
        with contextlib.suppress(Exception):
            print(
                f"irtrace: {len(collected.runs)} captured run(s) from {collected.processes} process(es) "
                f"written to {output}",
                file=sys.stderr,
                flush=True,
            )
    if collected.running:
        warn(
            f"{len(collected.running)} process(es) of this session still run; their runs stay in "
            f"{str(collected.running[0].parent)!r}: once they end, `irtrace collect {output}` adds them"
        )


def describe_collected(output: Path, collected: Collected) -> list[str]:
    """Lines for ``irtrace collect``'s user."""
    lines = [f"collected {len(collected.runs)} run(s) from {collected.processes} process(es) into {output}"]
    if not collected.written:
        lines = [f"no ended process left runs to collect; {output} is as it was"]
    if collected.running:
        lines.append(f"{len(collected.running)} process(es) still write; collect again once they end")
    return lines
