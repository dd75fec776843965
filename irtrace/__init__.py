"""irtrace: record every lowering pass of real TileLang kernels, for every backend.

The core of tilelang-devtools. ``irtrace.trace`` (the model and file) and ``irtrace.targets``
import no tilelang; ``irtrace.recorder``/``irtrace.loader`` import it lazily.
"""

from irtrace.errors import ExitCode, IrtraceError
from irtrace.targets import TARGETS, TargetSpec, get_target
from irtrace.trace import KernelRun, PassRecord, Trace, TraceWriter, load_trace

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
__version__ = "0.1.0"
