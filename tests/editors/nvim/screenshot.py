"""A screenshot of Neovim's real TUI showing our inlay hints on the GEMM example (for the README).

Neovim runs in tmux with editors/nvim on a trusted copy of examples/gemm.py; once the compiled hints
are on screen, the pane (with its colours) is rendered to SVG by rich and to PNG by Chromium.
Usage: python tests/editors/nvim/screenshot.py OUT.png  (needs tmux and Debian's chromium).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.terminal_theme import MONOKAI, TerminalTheme
from rich.text import Text

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = "/usr/lib/chromium/chromium"
WIDTH, HEIGHT = 150, 44
NVIM_DARK = TerminalTheme(
    (20, 22, 27),
    (224, 226, 234),
    [tuple(MONOKAI.ansi_colors[i]) for i in range(8)],
    [tuple(MONOKAI.ansi_colors[i]) for i in range(8, 16)],
)
"""Neovim's default dark background behind the pane, so lines read as one screen."""
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1330,790")
INIT = """
vim.g.loaded_python3_provider = 0
vim.opt.runtimepath:prepend({plugin!r})
vim.o.number = true
vim.o.termguicolors = true
vim.cmd.colorscheme('default')
vim.lsp.config('tilelang', {{ cmd = {{ {python!r}, '-m', 'tilelang_lsp.cli' }} }})
vim.lsp.enable('tilelang')
vim.api.nvim_create_autocmd('VimEnter', {{ once = true, nested = true, callback = function()
  vim.cmd('TileLangTrust ' .. {root!r})
  vim.cmd.edit({kernel!r})
  vim.cmd('normal! 28G')
  vim.cmd('echo ""')
end }})
"""


def main(output: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="tl-shot-") as folder:
        home = Path(folder)
        root = home / "kernels"
        root.mkdir()
        (root / "pyproject.toml").write_text('[project]\nname = "kernels"\nversion = "0"\n')
        kernel = root / "gemm.py"
        shutil.copy(ROOT / "examples" / "gemm.py", kernel)
        init = home / "init.lua"
        plugin, python = str(ROOT / "editors" / "nvim"), sys.executable
        init.write_text(INIT.format(plugin=plugin, python=python, root=str(root), kernel=str(kernel)))
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor")
        for name in ("config", "data", "state", "cache"):
            (home / name).mkdir()
            env[f"XDG_{name.upper()}_HOME"] = str(home / name)
        nvim = shutil.which("nvim", path=os.path.dirname(sys.executable))
        session = f"tilelang-shot-{os.getpid()}"
        tmux = ["tmux", "-L", session]
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), f"{nvim} --clean -u {init}"],
            env=env,
            check=True,
        )
        try:
            screen = ""
            deadline = time.monotonic() + 120
            while "elem/thr" not in screen and time.monotonic() < deadline:
                time.sleep(1)
                screen = subprocess.run(
                    [*tmux, "capture-pane", "-e", "-p"], capture_output=True, text=True, check=True
                ).stdout
            time.sleep(4)  # the code lens comes with the background lowering
            screen = subprocess.run(
                [*tmux, "capture-pane", "-e", "-p"], capture_output=True, text=True, check=True
            ).stdout
        finally:
            subprocess.run([*tmux, "kill-server"], check=False)
        if "elem/thr" not in screen:
            raise SystemExit(f"no compiled hints on screen:\n{screen}")
        console = Console(
            record=True, width=WIDTH, force_terminal=True, color_system="truecolor", file=io.StringIO()
        )
        console.print(Text.from_ansi(screen.rstrip("\n")), end="")
        svg = home / "screen.svg"
        svg.write_text(console.export_svg(title="nvim examples/gemm.py", theme=NVIM_DARK))
        page = home / "screen.html"
        page.write_text(f"<html><body style='margin:0;background:#fff'>{svg.read_text()}</body></html>")
        subprocess.run(
            [CHROMIUM, *BROWSER_FLAGS, f"--screenshot={output.resolve()}", page.as_uri()],
            check=True,
            capture_output=True,
        )
    print(output)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
