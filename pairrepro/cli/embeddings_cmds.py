"""CLI commands of the embeddings area (placeholder until its issue lands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the main app."""
