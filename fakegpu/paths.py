"""Where the built pieces live."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


class SetupError(RuntimeError):
    """Something the user must fix before fakegpu can run (missing build, bad flag)."""


def build_dir() -> Path:
    return Path(os.environ.get("FAKEGPU_BUILD_DIR") or REPO_ROOT / "build")


def built(name: str) -> Path:
    path = build_dir() / name
    if not path.exists():
        raise SetupError(f"{path} not found: build fakegpu first (cmake -S . -B build && cmake --build build)")
    return path
