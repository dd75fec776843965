"""``python -m tilelang_mcp``: the same as ``tilelang-mcp``."""

import sys

from tilelang_mcp.cli import main

sys.exit(main())
