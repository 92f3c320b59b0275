"""Take the inspector page's screenshots (docs/inspector/), for real, in headless Chromium.

A scripted OpenAI-compatible upstream (the one the tests use) answers on
loopback; memlane's app serves a temporary home in front of it; an agent-like
client runs a session with tool calls until governance compacts it, a chat
client asks about a remembered fact, and a few memories are added. Then Debian's
Chromium (driven by Playwright's Python package) logs in and photographs the
main pages, in light and dark. Regenerate with:

    .venv/bin/python scripts/inspector_screenshots.py        # writes docs/inspector/*.png
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.proxy.test_governance import MODEL, SMALL, history, summaries  # noqa: E402
from tests.support.browser import CHROMIUM_ARGS, MISSING, chromium_path  # noqa: E402
from tests.support.upstream import RunningProxy, ScriptedUpstream, start_proxy  # noqa: E402
from tests.ui.conftest import token_of  # noqa: E402

from memlane.config import Settings  # noqa: E402
from memlane.engine.memory import manage  # noqa: E402

OUT = ROOT / "docs" / "inspector"
MEMORIES = [
    ("The user prefers tabs over spaces in every repository.", "global"),
    ("The staging database is called heron; production is osprey.", "ns:job-queue"),
    ("Deploys happen on Tuesdays and Thursdays after 10:00 UTC.", "ns:job-queue"),
    ("Workers claim jobs with SELECT … FOR UPDATE SKIP LOCKED.", "ns:job-queue"),
    ("Failed jobs retry with exponential backoff: 30 s base, 5 attempts.", "ns:job-queue"),
]


def post(
    proxy: RunningProxy, session: str, messages: list[dict[str, object]], **headers: str
) -> None:
    response = httpx.post(
        f"{proxy.url}/chat/completions",
        json={"model": MODEL, "messages": messages},
        headers={"x-memlane-session": session, **headers},
        timeout=60,
    )
    response.raise_for_status()


def populate(proxy: RunningProxy) -> str:
    for text, scope in MEMORIES:
        proxy.call(
            lambda text=text, scope=scope: manage.add_memory(proxy.runtime, text, scope=scope)
        )
    agent = {"user-agent": "codex_cli_rs/0.169.0 (Debian 12)", "x-memlane-repo": "job-queue"}
    messages = history(40)
    messages.append({"role": "user", "content": "Where is the config file?"})
    post(proxy, "codex-build", messages, **agent)
    messages += [
        {"role": "assistant", "content": "It is conf/app.toml."},
        {"role": "user", "content": "Which database does staging use?"},
    ]
    post(proxy, "codex-build", messages, **agent)
    chat = {"user-agent": "OpenAI/Python 3.54.0", "x-memlane-repo": "job-queue"}
    for key, prompt in [
        ("retry-design", "How should failed jobs retry?"),
        ("deploy-day", "When do we deploy?"),
        ("tabs", "Reformat this file for me."),
    ]:
        post(proxy, key, [{"role": "user", "content": prompt}], **chat)
    session = proxy.store.find_session("codex-build")
    assert session is not None
    return session.id


def main() -> None:
    executable = chromium_path()
    if executable is None:
        sys.exit(MISSING)
    from playwright.sync_api import sync_playwright

    upstream = ScriptedUpstream()
    upstream.start()
    upstream.respond_with(summaries)
    home = Path(tempfile.mkdtemp(prefix="memlane-screenshots-"))
    settings = Settings(
        home=home,
        upstream_url=upstream.url,
        embedding_backend="hashing",
        memory_extract_facts=False,
        index_enabled=False,
        upstream_price_input=2.5,
        upstream_price_output=10.0,
        **{k: v for k, v in SMALL.items() if k not in ("memory_enabled", "index_enabled")},
    )
    proxy = start_proxy(settings)
    try:
        session_id = populate(proxy)
        OUT.mkdir(parents=True, exist_ok=True)
        shots = [
            ("overview", "/ui"),
            ("sessions", "/ui/sessions"),
            ("session", f"/ui/sessions/{session_id}#timeline"),
            ("memories-search", "/ui/memories?q=staging+database"),
        ]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(executable), args=CHROMIUM_ARGS
            )
            for scheme in ("light", "dark"):
                context = browser.new_context(
                    viewport={"width": 1280, "height": 820}, color_scheme=scheme
                )
                page = context.new_page()
                page.goto(f"{proxy.base}/ui?token={token_of(proxy)}")
                for name, path in shots:
                    if scheme == "dark" and name != "session":
                        continue
                    page.goto(f"{proxy.base}{path}")
                    if name == "session":
                        page.locator(".item.compaction").first.scroll_into_view_if_needed()
                    target = OUT / (f"{name}-dark.png" if scheme == "dark" else f"{name}.png")
                    page.screenshot(path=str(target))
                    print(f"wrote {target.relative_to(ROOT)}")
                context.close()
            browser.close()
        print(json.dumps({"session": session_id}))
    finally:
        proxy.stop()
        upstream.stop()


if __name__ == "__main__":
    main()
