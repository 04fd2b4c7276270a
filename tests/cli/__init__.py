"""Tests of the command line and countersign.toml."""
