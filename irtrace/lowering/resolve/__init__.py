"""Which instance of a kernel the tools analyze: one resolver for the language server and the MCP
server (a directive, recorded runs, the entry point, a call in the file, then symbols)."""
