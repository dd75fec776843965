"""LSP handlers, one method per module: each has ``METHOD``, optional ``OPTIONS`` and ``handle``."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from tilelang_lsp import commands
from tilelang_lsp.features import (
    code_action,
    code_lens,
    completion,
    definition,
    did_change,
    did_close,
    did_open,
    hover,
    initialize,
    initialized,
    inlay_hint,
    ir_after_pass,
    passes,
    shutdown,
    signature_help,
    worker_status,
)

MODULES: list[ModuleType] = [
    initialize,
    initialized,
    shutdown,
    did_open,
    did_change,
    did_close,
    inlay_hint,
    hover,
    code_lens,
    passes,
    ir_after_pass,
    worker_status,
    completion,
    signature_help,
    definition,
    code_action,
]
COMMANDS: dict[str, Any] = commands.COMMANDS
