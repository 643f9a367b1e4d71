"""The one unknown-key check of every config section: a key that is not one of the section's
keys is an error naming its path and the closest valid key (``did you mean 'rate_hz'?``).
The keys themselves are listed per section in robot_ident/cli/config_schema.py (docs/config.md)."""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from ..errors import ConfigError

CUTOFF = 0.6            # difflib similarity above which a known key is offered as the intended one


def closest_key(key, known: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The known key most similar to `key` (difflib), or None when none is similar enough."""
    close = difflib.get_close_matches(str(key), sorted(str(k) for k in known), n=1, cutoff=cutoff)
    return close[0] if close else None


def unknown_key_hint(key, known: Iterable[str]) -> str:
    """``did you mean 'x'? (known keys: a, b)``, or ``known keys: a, b`` when nothing is close."""
    known = sorted(str(k) for k in known)
    close = closest_key(key, known)
    listing = f"known keys: {', '.join(known)}"
    return f"did you mean {close!r}? ({listing})" if close else listing


def unknown_key_error(where: str, key, known: Iterable[str], error: type[Exception] = ConfigError) -> Exception:
    """The error for `key` under the section `where`: ``where.key: unknown key; did you mean ...``."""
    path = f"{where}.{key}" if where else str(key)
    return error(f"{path}: unknown key; {unknown_key_hint(key, known)}")


def check_keys(section: Mapping, known: Iterable[str], where: str, error: type[Exception] = ConfigError) -> None:
    """Raise `unknown_key_error` for the first key of `section` (in its order) that is not `known`."""
    known = set(known)
    for key in section:
        if key not in known:
            raise unknown_key_error(where, key, known, error)
