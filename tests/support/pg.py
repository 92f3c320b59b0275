"""Shared test fixtures: pg."""
