"""``irtrace record --order-from``: the previous run times that let ``--jobs N`` start the longest first."""

from __future__ import annotations

from pathlib import Path

from irtrace.base.errors import IrtraceError
from irtrace.perf.schedule import RunKey, previous_run_times


def run_times_for(order_from: str | None, output: str, jobs: int) -> dict[RunKey, float] | None:
    """The run times to order the work by: ``--order-from``'s (a bad file is the user's error),
    else, with ``--jobs`` > 1, those of the trace at ``output`` a previous recording left, if it
    reads (it is about to be replaced; an unreadable one only costs the order)."""
    if order_from is not None:
        return previous_run_times(order_from)
    if jobs <= 1 or not Path(output).is_file():
        return None
    try:
        return previous_run_times(output)
    except IrtraceError:
        return None
