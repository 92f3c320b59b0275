"""The web inspector: a face that lets a person see and steer what memlane remembers.

`memlane serve` mounts it at `/ui` (`MEMLANE_UI_ENABLED`, on by default). It is
server-rendered (Jinja2 templates, htmx vendored in the package for partial
updates and polling; no CDN, no build step, no request to any other origin) and
asks for the admin token (`ui.auth`). Its pages read the store through
bounded queries and edit through the same engine functions as the CLI.

Modules: `auth` (token, cookie, CSRF), `web` (shared dependencies), `render`
(templates and headers), `login`, `sessions` (+ `timeline`), `memories`,
`overview` (overview and activity).
"""

from __future__ import annotations

from fastapi import FastAPI

from memlane.ui import login, memories, overview, sessions, web


def mount(app: FastAPI) -> None:
    """Add the inspector's routes under `/ui` and its HTML error pages to `app`."""
    web.install(app)
    for module in (login, sessions, memories, overview):
        app.include_router(module.router)
