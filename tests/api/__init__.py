"""Tests of the HTTP API and webhooks."""
