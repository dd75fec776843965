"""The trace file: its typed records, the model every reader asks, reading (whole or run by
run), writing, and summaries. No tilelang here."""
