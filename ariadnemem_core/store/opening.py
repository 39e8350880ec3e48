"""Open a store from a path or a URL, and keep credentials out of everything printed.

A directory (or None, for a temporary one) opens the embedded SQLite + chromadb store; a
``postgresql://`` (or ``postgres://``) URL opens the Postgres backend, which needs the
``postgres`` extra (``pip install 'ariadnemem[postgres]'``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..errors import StoreError

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

    from .protocol import Store

#: URL schemes that name a Postgres server.
POSTGRES_SCHEMES = ("postgresql", "postgres")
#: Query parameters whose values are secrets (redacted like the password).
_SECRET_PARAMS = frozenset({"password", "sslpassword", "passfile"})


def is_store_url(location: str | Path | None) -> bool:
    """Whether ``location`` is a server URL rather than a directory."""
    if not isinstance(location, str):
        return False
    return urlsplit(location).scheme.lower() in POSTGRES_SCHEMES and "://" in location


#: A location that names a scheme ("mysql://", "postgresql+psycopg://"): a URL, never a
#: directory, whether or not it is one this library opens.
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_location(location: object) -> None:
    """Refuse a URL of a scheme no backend opens (a driver suffix, a typo, another
    database), naming only its scheme.

    Why: read as a directory name it made a local store under ``./postgresql+psycopg:/``
    on each host, so hosts meant to share one memory each kept their own, and the
    password showed in ``location``.

    Raises:
        StoreError: the URL's scheme is not ``postgresql`` or ``postgres``.
    """
    if isinstance(location, str) and _URL_LIKE.match(location) and not is_store_url(location):
        scheme = location.split("://", 1)[0]
        hint = " (drop the driver suffix: postgresql://...)" if "+" in scheme else ""
        raise StoreError(f"no store backend opens {scheme}:// URLs{hint}; give a postgresql:// URL or a directory")


def check_url_secret(url: str) -> None:
    """Refuse a URL whose password holds a character it must percent-encode (``@``, ``/``,
    ``?``, ``#``) or a broken escape (``%`` not followed by two hex digits, or bytes that
    are no UTF-8).

    Why: such a URL is split differently by Python (``urlsplit``: at the last ``@``) and by
    libpq (at the first), so no redaction can know which part is the password, and part of
    it would show in ``location``, ``repr`` and libpq's own error messages. The message
    says what to do and holds nothing of the URL.

    Raises:
        StoreError: the URL's password must be percent-encoded first.
    """
    rest = url.split("://", 1)[1] if "://" in url else url
    at = rest.rfind("@")
    if at < 0:
        return
    userinfo = rest[:at]
    user, colon, password = userinfo.partition(":")
    cut = min((i for i in (password.find(c) for c in "@/?#") if i >= 0), default=-1)
    # "host:5432/db?user=a@b" has no password: a port before the path is no secret.
    bad = colon and ((cut >= 0 and not password[:cut].isdigit()) or "@" in user)
    broken = re.search(r"%(?![0-9A-Fa-f]{2})", userinfo) is not None
    try:
        unquote(userinfo, errors="strict")  # "%cd" alone is no UTF-8
    except UnicodeDecodeError:
        broken = True
    if bad or broken:
        raise StoreError("the store URL's password holds a character that must be percent-encoded (@, /, ?, #, "
                         "or a % not starting an escape): encode it, e.g. urllib.parse.quote(password, safe='')")


def redact_url(url: str) -> str:
    """``url`` with its password (and secret query parameters) replaced by ``***``.

    Why: a store's location is printed in messages, ``stats`` and ``repr``; a URL from
    an environment variable usually carries the database password.
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostinfo = netloc.rpartition("@")
            user, colon, _pw = userinfo.partition(":")
            netloc = f"{user}:***@{hostinfo}" if colon else f"{user}@{hostinfo}"
        query = urlencode([(k, "***" if k.lower() in _SECRET_PARAMS else v)
                           for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="/*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return f"{url.split(':', 1)[0]}://***"


def with_schema(url: str, schema: str) -> str:
    """``url`` with its ``schema`` parameter set: one database holds several memories,
    each in its own Postgres schema (a bench's systems, a test's stores)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "schema"]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode([*query, ("schema", schema)], safe="/"), ""))


def open_store(location: str | Path | None, *, dim: int, embedder_name: str,
               chroma_client: ClientAPI | None = None, chroma_host: str | None = None,
               chroma_port: int | None = None, lock_timeout: float | None = None) -> Store:
    """The backend ``location`` names, opened.

    Args:
        location: a directory, None (a temporary directory), or a ``postgresql://`` URL.
        dim: the embedding dimension (checked against an existing store).
        embedder_name: the embedder's name (an existing store of another one is refused).
        chroma_client: a chromadb client for the vectors (embedded backend only).
        chroma_host: a Chroma server's host (embedded backend only).
        chroma_port: the Chroma server's port.
        lock_timeout: longest wait for a lock, in seconds.

    Raises:
        StoreError: the store cannot be opened, the Postgres extra is missing, Chroma
            options were given with a Postgres URL, or a URL names another scheme.
    """
    check_location(location)
    if is_store_url(location):
        assert isinstance(location, str)
        if chroma_client is not None or chroma_host is not None:
            raise StoreError("chroma_host / chroma_client do not apply to a Postgres store: its vectors live in "
                             "Postgres (pgvector)")
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise StoreError("a postgresql:// store needs the postgres extra: pip install 'ariadnemem[postgres]' "
                             f"({exc.name or exc} is missing)") from None
        return PostgresStore(location, dim=dim, embedder_name=embedder_name, lock_timeout=lock_timeout)
    from . import SQLiteStore

    return SQLiteStore(location, dim=dim, embedder_name=embedder_name, chroma_client=chroma_client,
                       chroma_host=chroma_host, chroma_port=chroma_port, lock_timeout=lock_timeout)
