"""Where the built pieces live: in the installed package where `pip install .` put them
(native/ and configs/ beside the modules), else in this checkout's build/ and configs/."""

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE.parent


class SetupError(RuntimeError):
    """Something the user must fix before fakegpu can run (missing build, bad flag)."""


def _installed(folder):
    """`folder` inside the installed package; None in a checkout. An editable install keeps what
    CMake installed apart from the sources, so every folder of the package's path is looked at."""
    import fakegpu

    for root in getattr(fakegpu, "__path__", [str(PACKAGE)]):
        path = Path(root) / folder
        if path.is_dir():
            return path
    return None


def build_dir() -> Path:
    return Path(os.environ.get("FAKEGPU_BUILD_DIR") or _installed("native") or REPO_ROOT / "build")


def configs_dir() -> Path:
    return _installed("configs") or REPO_ROOT / "configs"


def built(name: str) -> Path:
    path = build_dir() / name
    if not path.exists():
        if path.parent == _installed("native"):
            raise SetupError(f"{path} not found: the installed package has fakegpu's libraries and coordinator; "
                             f"{name} comes with a build of the source tree "
                             "(cmake -S . -B build && cmake --build build)")
        raise SetupError(f"{path} not found: build fakegpu first (cmake -S . -B build && cmake --build build)")
    return path
