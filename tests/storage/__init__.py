"""Tests of the database layer on SQLite and PostgreSQL: leases, claims, quorum, retention."""
