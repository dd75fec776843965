"""irtrace: record every lowering pass of real TileLang kernels, for every backend.

The core of tilelang-devtools. ``irtrace.core.trace`` (the model and file) and ``irtrace.core.targets``
import no tilelang; ``irtrace.recording.recorder``/``irtrace.recording.loader`` import it lazily.
"""

from irtrace.core.errors import ExitCode, IrtraceError
from irtrace.core.targets import TARGETS, TargetSpec, get_target
from irtrace.core.trace import KernelRun, PassRecord, Trace
from irtrace.core.trace_reader import load_trace
from irtrace.core.trace_writer import TraceWriter

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
