"""One open document at one version: its text, and the analysis results with the versions they
came from.

A ``Document`` is never changed in place: the server replaces it whole (``dataclasses.replace``)
when an edit or a result arrives, and only with a result for the version it still has. A handler
that holds one reads one consistent state, whatever other coroutines finish meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tilelang_lsp.protocol import AnalysisResult, CompiledKernel, KernelAnalysis

UNTRUSTED = "workspace not trusted"


@dataclass(frozen=True)
class Failure:
    """Why there is no analysis for a version: a time or memory limit, a worker crash, trust."""

    message: str
    line: int | None = None
    """1-based line of the kernel being built when the worker was stopped, if known."""


@dataclass(frozen=True)
class ExtraTarget:
    """The document analyzed for one of the ``extraTargets`` (side-by-side layouts in hover)."""

    target: str
    result: AnalysisResult | None
    error: str | None = None
    """Why there is no result (the request failed)."""


@dataclass(frozen=True)
class Document:
    """An open document and what is known about it."""

    uri: str
    path: str
    version: int
    text: str
    uses_tilelang: bool = True
    """Whether the text is a TileLang file; other files get nothing (no hints, no diagnostics)."""
    runnable: bool = True
    """Whether analysis may execute the text: it parses and has a real import of tilelang."""
    analysis: AnalysisResult | None = None
    """The worker's facts for ``analysis_version`` (primary targets, up to layout inference)."""
    analysis_version: int | None = None
    failure: Failure | None = None
    """Why there is no analysis for the current version."""
    extra: tuple[ExtraTarget, ...] = ()
    """Results for the extra targets, for ``extra_version``."""
    extra_version: int | None = None
    summary: AnalysisResult | None = None
    """The full lowering (code lens), for ``summary_version``."""
    summary_version: int | None = None
    machine: tuple[CompiledKernel, ...] = ()
    """What nvcc said of each kernel of the full lowering, for ``machine_version``."""
    machine_version: int | None = None

    def current(self, version: int | None) -> bool:
        """Whether a result made for ``version`` is for this text."""
        return version is not None and version == self.version

    def kernel_at(self, line: int) -> KernelAnalysis | None:
        """The analyzed kernel whose definition is the last one at or above ``line`` (1-based)."""
        kernels = self.analysis.kernels if self.analysis is not None else ()
        above = [k for k in kernels if k.line and k.line <= line]
        return max(above, key=lambda k: k.line or 0) if above else None

    def compiled(self, kernel: str) -> CompiledKernel | None:
        """nvcc's answer for ``kernel`` of this version's full lowering, once it came."""
        if not self.current(self.machine_version):
            return None
        return next((c for c in self.machine if c.kernel == kernel), None)

    def is_file(self, file: str | None) -> bool:
        """Whether ``file`` (a buffer's or a diagnostic's) is this document's file."""
        if not file:
            return False
        try:
            return Path(file).resolve() == Path(self.path).resolve()
        except OSError:
            return False
