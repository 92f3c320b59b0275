"""Shared test fixtures: upstream."""
