"""passdiff, the command: IR-aware diffs between passes, runs and targets, printed for people.

Its algorithms are a floor of the platform, ``irtrace.diff``, which irtrace's own commands use too.
"""
