"""Tests of whole `serve`, demo and replica processes, killed and started again."""
