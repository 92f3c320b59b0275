"""The ASGI application (placeholder until the proxy lands)."""

from __future__ import annotations

from fastapi import FastAPI

from memlane.config import Settings


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="memlane")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
