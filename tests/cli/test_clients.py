"""What `memlane connect` writes into agents' files, and how it takes it out again."""

from __future__ import annotations

import json
import tomllib

import pytest

from memlane.cli import clients

WIRING = clients.Wiring("http://127.0.0.1:8100", "/opt/tools/bin/memlane", "OPENAI_API_KEY")
USERS = """# my settings
model = "o3"
model_provider = "openai"

[profiles.fast]
model = "gpt-4o"
"""


def test_codex_connect_is_valid_toml_idempotent_and_removed_byte_for_byte() -> None:
    connected = clients.codex_connect(USERS, WIRING)
    data = tomllib.loads(connected)
    assert data["model_provider"] == "memlane"
    assert data["model"] == "o3"
    assert data["model_providers"]["memlane"] == {
        "name": "memlane",
        "base_url": "http://127.0.0.1:8100/v1",
        "wire_api": "responses",
        "env_key": "OPENAI_API_KEY",
    }
    assert data["mcp_servers"]["memlane"] == {"command": "/opt/tools/bin/memlane", "args": ["mcp"]}
    assert data["profiles"] == {"fast": {"model": "gpt-4o"}}
    assert clients.codex_connect(connected, WIRING) == connected
    assert clients.codex_remove(connected) == USERS
    assert clients.codex_remove(USERS) == USERS


def test_codex_connect_on_an_empty_file_and_a_new_address() -> None:
    connected = clients.codex_connect("", WIRING)
    assert tomllib.loads(connected)["model_provider"] == "memlane"
    assert clients.codex_remove(connected) == ""
    moved = clients.codex_connect(connected, clients.Wiring("http://127.0.0.1:9000", "/m"))
    provider = tomllib.loads(moved)["model_providers"]["memlane"]
    assert provider == {
        "name": "memlane",
        "base_url": "http://127.0.0.1:9000/v1",
        "wire_api": "responses",
    }


def test_a_hand_made_memlane_table_is_refused_with_what_to_do() -> None:
    by_hand = '[model_providers.memlane]\nbase_url = "http://127.0.0.1:8100/v1"\n'
    with pytest.raises(clients.ClientConfigError, match="delete it"):
        clients.codex_connect(by_hand, WIRING)


def test_claude_json_is_restored_exactly_or_surgically_after_the_client_wrote_to_it() -> None:
    original = (
        '{\n    "env": {"ANTHROPIC_BASE_URL": "https://gateway.example"},\n    "theme": "dark"\n}\n'
    )
    written, previous = clients.json_set(original, clients.SETTINGS_PATH, WIRING.base_url)
    assert json.loads(written)["env"]["ANTHROPIC_BASE_URL"] == WIRING.base_url
    record = clients.Record(original, written, previous)
    assert clients.json_restore(written, record, clients.SETTINGS_PATH) == original

    touched = json.dumps({**json.loads(written), "numStartups": 3})  # Claude Code wrote since
    restored = json.loads(clients.json_restore(touched, record, clients.SETTINGS_PATH) or "")
    assert restored == {
        "env": {"ANTHROPIC_BASE_URL": "https://gateway.example"},
        "theme": "dark",
        "numStartups": 3,
    }


def test_a_json_file_memlane_created_is_deleted_and_a_new_key_dropped() -> None:
    written, previous = clients.json_set(None, clients.STATE_PATH, clients.claude_mcp_value(WIRING))
    assert previous is None
    record = clients.Record(None, written, previous)
    assert clients.json_restore(written, record, clients.STATE_PATH) is None
    later = json.dumps({**json.loads(written), "userID": "x"})
    assert json.loads(clients.json_restore(later, record, clients.STATE_PATH) or "") == {
        "userID": "x"
    }
    with pytest.raises(clients.ClientConfigError, match="not valid JSON"):
        clients.json_set("{broken", clients.SETTINGS_PATH, "x")


def test_the_mcp_entry_carries_the_options_that_open_the_proxys_home() -> None:
    wiring = clients.Wiring(
        "http://127.0.0.1:8100", "/opt/tools/bin/memlane", options=("--home", "/data/work")
    )
    codex = tomllib.loads(clients.codex_connect("", wiring))
    assert codex["mcp_servers"]["memlane"]["args"] == ["--home", "/data/work", "mcp"]
    claude = clients.claude_mcp_value(wiring)
    assert claude["args"] == ["--home", "/data/work", "mcp"]
    assert claude["command"] == "/opt/tools/bin/memlane"
