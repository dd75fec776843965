"""An MCP server that answers coding agents from TileLang's real compiler (``tilelang-mcp``).

The server (``tilelang_mcp.server``) never imports tilelang; a worker process does the lowering,
each job in a child process of its own (``tilelang_mcp.worker``).
"""
