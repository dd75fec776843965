"""What the ``IRTRACE`` startup hook costs a Python process: ``python -c pass`` started with the
hook (``irtrace-autocapture.pth``, run by ``site`` as from site-packages) and without it.

Unset, the hook is one environment lookup and imports nothing, so the two should not differ
beyond noise. Set (``IRTRACE=...``, a process that never imports TileLang), the process also
imports irtrace's trace writer and merges nothing at exit: that cost is printed too.

    python bench/autocapture_startup.py [--runs 40] [--smoke]

Ends with: RESULT unset_ms=<hook> no_hook_ms=<without> unset_overhead_ms=<diff> set_ms=<IRTRACE set>
(medians of interleaved runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def environment(folder: Path, hook: bool, **variables: str) -> dict[str, str]:
    site_dir, boot = folder / ("site" if hook else "empty-site"), folder / "boot"
    site_dir.mkdir(exist_ok=True)
    boot.mkdir(exist_ok=True)
    if hook:
        shutil.copy(ROOT / "irtrace-autocapture.pth", site_dir)
    (boot / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site_dir)!r})\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRTRACE")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(boot), str(ROOT)]), **variables}


def start_ms(env: dict[str, str], cwd: Path) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, cwd=cwd, check=True)
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--smoke", action="store_true", help="run once, small (3 runs): for CI")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 3
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        kinds = {
            "no_hook": environment(folder, hook=False),
            "unset": environment(folder, hook=True),
            "set": environment(folder, hook=True, IRTRACE=str(folder / "out.jsonl")),
        }
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        for env in kinds.values():  # warm the file cache once
            start_ms(env, folder)
        for _ in range(args.runs):  # interleaved, so machine load falls on every kind alike
            for kind, env in kinds.items():
                times[kind].append(start_ms(env, folder))
    median = {kind: statistics.median(values) for kind, values in times.items()}
    for kind, values in times.items():
        print(f"{kind:8} median {median[kind]:7.2f} ms  min {min(values):7.2f} ms  ({len(values)} runs)")
    print(
        f"RESULT unset_ms={median['unset']:.2f} no_hook_ms={median['no_hook']:.2f} "
        f"unset_overhead_ms={median['unset'] - median['no_hook']:.2f} set_ms={median['set']:.2f}"
    )


if __name__ == "__main__":
    main()
