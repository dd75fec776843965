"""irtrace: record every lowering pass of real TileLang kernels, for every backend.

The core of tilelang-devtools. ``irtrace.trace.model`` (the model and file) and ``irtrace.targets.backends``
import no tilelang; ``irtrace.lowering.recorder``/``irtrace.lowering.loader`` import it lazily.
"""

from irtrace.base.errors import ExitCode, IrtraceError
from irtrace.targets.backends import TARGETS, TargetSpec, get_target
from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import TraceWriter

__all__ = [
    "TARGETS",
    "ExitCode",
    "IrtraceError",
    "KernelRun",
    "PassRecord",
    "TargetSpec",
    "Trace",
    "TraceWriter",
    "get_target",
    "load_trace",
]
__version__ = "0.2.0"
