"""What identifies the library's code in a build: its version and a digest of its sources.

gt4py keys its translation cache and build folders by fingerprints of the translation step
(the hooks' fields) and by `gt4py.next.config.BUILD_CACHE_VERSION_ID`. The library puts
`build_identity()` into both (`integration.hooks.LibraryHook`, `integration.install`), so
that a persistent build cache (`GT4PY_BUILD_CACHE_LIFETIME=persistent`) never serves a
build that another version of the library made. The digest covers an editable install
changed without a version bump as well.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib

from gt4py_dace_xforms.version import __version__


_PACKAGE = pathlib.Path(__file__).resolve().parent.parent


@functools.cache
def source_digest() -> str:
    """12 hex digits of SHA-256 over the package's Python sources (path and bytes).

    Returns:
        the digest, 12 hex digits.
    """
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def build_identity() -> str:
    """`<version>+<source digest>`, e.g. `0.3.0+3f1c2a9b0d4e`.

    Returns:
        the version and the source digest.
    """
    return f"{__version__}+{source_digest()}"


def digest(*parts: object) -> str:
    """16 hex digits of SHA-256 over the `repr` of `parts` (settings made of plain data,
    dataclasses and enums, whose `repr` is stable across processes).

    Args:
        parts: the settings to identify.

    Returns:
        the digest, 16 hex digits.
    """
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
