"""Performance read from traces: latency and resources compared, occupancy, per-kernel metrics,
bench sizes, and which run a pool starts first. No tilelang here."""
