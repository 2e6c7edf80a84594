"""Trace input: opening (plain, gzip, zstd) and chunking (source), format detection (formats),
C scanning into columns (scan). Import the submodule you need: scan loads the C engine."""
