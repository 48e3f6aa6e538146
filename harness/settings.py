"""Where the project lives, and the tunables of the engine, in one place."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
