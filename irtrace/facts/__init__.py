"""What a trace tells about buffers, layouts and source lines, in the form every consumer
reads; a document's syntax tree. No tilelang here."""
