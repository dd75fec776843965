"""``python -m tilelang_mcp.trace_copy LIMIT_MB TRACE COPY``: load a trace under a memory limit
and write it again, so that the server loads only a copy that fits.

A trace named by an agent can be hostile (a decompression bomb, millions of records): the server
never reads it itself. This child caps its own address space first (``LIMIT_MB`` on top of what
the interpreter maps), loads the trace with irtrace's reader, and writes its runs to ``COPY``
(a plain file in the server's store). Exit 0 when written; 6 and one line on stderr when the
trace is not one; 9 when it needs more memory than the limit.
"""

from __future__ import annotations

import os
import resource
import sys


def limit_memory(megabytes: int) -> None:
    """Cap this process's address space at what it maps now plus ``megabytes``."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + megabytes * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(hard, cap), hard))


def main(argv: list[str]) -> int:
    limit_mb, trace_path, copy_path = int(argv[0]), argv[1], argv[2]
    from irtrace.base.errors import IrtraceError
    from irtrace.trace.reader import load_trace
    from irtrace.trace.writer import write_merged

    limit_memory(limit_mb)
    try:
        write_merged([load_trace(trace_path)], copy_path)
    except IrtraceError as error:
        print(error.message, file=sys.stderr)
        return int(error.exit_code)
    except MemoryError:
        print(f"{trace_path!r} needs more than {limit_mb} MB to load (--memory-limit)", file=sys.stderr)
        return 9
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
