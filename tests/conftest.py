"""Fixtures shared by the whole suite live in tests/support/, one module per concern."""

pytest_plugins = [
    "tests.support.stores",
    "tests.support.text",
    "tests.support.running_proxy",
    "tests.support.upstream",
    "tests.support.anthropic_upstream",
    "tests.support.pg",
]
