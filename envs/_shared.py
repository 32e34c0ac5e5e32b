"""Data loaded once per process and shared by every env instance in it (a pool builds many)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_loaded: dict[Hashable, Any] = {}
_lock = threading.Lock()


def load_once(key: Hashable, load: Callable[[], T]) -> T:
    """Return what ``load()`` gave the first time ``key`` was asked for in this process (thread-safe)."""
    with _lock:
        if key not in _loaded:
            _loaded[key] = load()
        return _loaded[key]


def abs_path(path: str | os.PathLike | None) -> str | None:
    """Absolute, user-expanded form of ``path`` (None stays None), so equal files give equal cache keys."""
    return None if path is None else str(Path(path).expanduser().resolve())
