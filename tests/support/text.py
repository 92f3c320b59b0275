"""Shared test fixtures: text."""
