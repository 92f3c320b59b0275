"""Shared test fixtures: stores."""
