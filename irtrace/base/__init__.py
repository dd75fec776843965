"""The ground floor: errors a user can act on, output written whole, safe terminal text,
Ctrl-C, TileLang's native log lines, TOML reading. Imports nothing else of irtrace."""
