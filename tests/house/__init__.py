"""Tests of the repository's own rules: import layers, README commands, the manifest."""
