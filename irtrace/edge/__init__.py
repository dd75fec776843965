"""What every command line does the same way: one-line errors, safe terminal output."""
