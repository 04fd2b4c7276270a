"""Tests of crews and flows through the real runtime and worker processes."""
