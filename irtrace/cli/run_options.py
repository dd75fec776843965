"""The ``irtrace run`` command line: its options and help (``irtrace.cli.main.cmd_run`` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

from irtrace.base.errors import exit_codes_help
from irtrace.cli.bench_options import add_bench_options
from irtrace.cli.override import add_override_option
from irtrace.cli.spans import add_source_map_option

RUN_EPILOG = """\
The script's own compilations keep their target; -t adds targets. On a machine without
that GPU the script itself then fails where it first runs a kernel (e.g. at .cuda()):
the runs are kept and the exit code is 7. Kernels lowered in processes it starts
(os.fork, multiprocessing with fork, spawn or forkserver) are captured too and merged
into the trace when the script ends; -t lowers again only the kernels of the script's
own process.

With --no-gpu the script runs to its end on a machine without a GPU: each kernel is
lowered through TileLang's own pipeline and codegen (no device compiler), the compiled
kernel is a stand-in returning meta tensors, torch.cuda answers for the target, and
@autotune builds its first config only. Tensors made on cuda from known values (torch.tensor
of data, arange, zeros, ...) keep CPU twins, so .item() of those answers as on the GPU; .item()
of a random tensor ends the script (exit 7). A pytest suite runs the same way:
irtrace run --no-gpu -- python -m pytest tests/

How the script ended decides the exit code, and whatever was captured is written to the
trace in every case: 0 when it ended with status 0 (os._exit(0) included); 7 when it raised
(a KeyboardInterrupt of its own included) or exited with another status (sys.exit(N),
os._exit(N)). The script's status is not passed on, so that it cannot be read as one of
irtrace's codes; 130 and 143 only when irtrace itself received Ctrl-C or SIGTERM (it ends the
script within 5 s of either, even inside a long C call).

"""


def add_run_command(commands: Any, default_output: str) -> None:
    """Add ``irtrace run`` to the subcommands."""
    run = commands.add_parser(
        "run",
        help="capture every kernel a script lowers: irtrace run -- python script.py ARGS",
        description="Run a Python script and capture every kernel it lowers, without editing it.",
        epilog=RUN_EPILOG + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "-t",
        "--target",
        action="append",
        default=[],
        help="an extra target: lower each kernel the script compiled again for it, to kernel source "
        "as irtrace record does (no device compiler is called); repeatable",
    )
    run.add_argument(
        "--auto-target",
        metavar="T",
        help='what target="auto" means in the script when TileLang finds no GPU (default cuda:sm_90a)',
    )
    run.add_argument(
        "--no-gpu",
        action="store_true",
        help="run the script's GPU work on stand-ins (IRTRACE_NO_GPU=1 for the processes it starts): "
        "every kernel it builds is lowered and captured, none is launched; tensors on cuda are shapes "
        "only (meta). Its runs say stand_in, and --bench refuses them",
    )
    run.add_argument(
        "--machine-code",
        action="store_true",
        help="also compile each CUDA run's source to PTX and SASS "
        "as record --machine-code does (needs nvcc, no GPU)",
    )
    add_bench_options(
        run,
        "also time each CUDA kernel on the GPU with the sizes of the script's own call (--bench-shape "
        "overrides them); without a GPU the run keeps a failed bench saying why",
    )
    add_override_option(run)
    add_source_map_option(
        run, default=True
    )  # for the script and every process it starts (IRTRACE_SOURCE_MAP)
    run.add_argument("-o", "--output", default=default_output)
    run.add_argument("-q", "--quiet", action="store_true")
    run.add_argument("script", nargs=argparse.REMAINDER, help="-- python script.py ARGS")
