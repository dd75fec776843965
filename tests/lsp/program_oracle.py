"""The instance a program really uses, found by running the program's own call: run as
``python program_oracle.py FILE`` (the file's entry point) or ``python program_oracle.py --pytest
TEST_ID`` (one test), it wraps TileLang's ``tilelang.lower``, ``tilelang.compile`` and
``JITImpl.compile``; at the program's first compilation it lowers that very PrimFunc with the
plain instrument of ``oracle.py`` and prints ``[[line, hint], ...]`` as JSON, then ends the process.
Nothing here uses irtrace or tilelang_lsp.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import compiler_buffers, expected_hint

TARGET = "cuda:sm_90"


ORIGINALS: dict[str, Any] = {}


def report(func: Any) -> None:
    import tilelang

    tilelang.lower, tilelang.compile = ORIGINALS["lower"], ORIGINALS["compile"]
    hints = sorted(
        (b.line, expected_hint(b, TARGET)) for b in compiler_buffers(func, TARGET) if b.line is not None
    )
    os.write(ORIGINALS["stdout"], (json.dumps(hints) + "\n").encode())
    os._exit(0)


def main() -> None:
    import tilelang
    from tilelang.jit import JITImpl

    def lower_first(func: Any, *args: Any, **kwargs: Any) -> Any:
        report(func)

    def compile_first(self: Any, *args: Any, **kwargs: Any) -> Any:
        report(self.get_tir(*args, **kwargs))

    # pytest captures file descriptor 1: the answer goes to a copy taken before
    ORIGINALS.update(lower=tilelang.lower, compile=tilelang.compile, stdout=os.dup(1))
    tilelang.lower = lower_first
    tilelang.compile = lower_first
    JITImpl.compile = compile_first  # type: ignore[method-assign]
    if sys.argv[1] == "--pytest":
        import pytest

        os.chdir(Path(sys.argv[2].split("::")[0]).resolve().parent)
        pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", sys.argv[2]])
    else:
        sys.argv = sys.argv[1:]
        sys.path.insert(0, str(Path(sys.argv[0]).resolve().parent))
        runpy.run_path(sys.argv[0], run_name="__main__")
    sys.exit("the program never compiled a kernel")


if __name__ == "__main__":
    main()
