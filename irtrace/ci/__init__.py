"""Checks of traces against a baseline and policy, their reports, and reproducers."""
