"""Runs TileLang: kernel loading, the pass recorder, executors, capture, machine code."""
