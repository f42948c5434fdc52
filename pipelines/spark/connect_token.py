"""The authentication token of a Spark Connect server epochgate starts, and how clients send it.

A Spark Connect client can run any Python on its server, so a server epochgate starts asks every
client for a token (Spark's ``spark.connect.authenticate.token``): a fresh random one per start,
in ``$EPOCHGATE_HOME/connect/PORT/token``, a file only its owner can read (mode 0600). A client
session for ``sc://127.0.0.1:PORT`` finds the token of the server epochgate started on that port
there; a token written in the URL (``;token=...``) or in ``$SPARK_CONNECT_AUTHENTICATE_TOKEN``
is used as given instead. The token never appears in a URL epochgate prints or an error it raises.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from pipelines.settings import CONNECT_DIR, state_dir

TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""Where the server reads its token when started, and the client its own when none is in the
URL (both Spark's)."""
TOKEN_PARAM = "token"
TOKEN_FILE = "token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
LOCAL_NAME = "localhost"
"""The one host name for which PySpark's client sends a token over a plain (not TLS) channel:
its local credentials. To any other host it sends a token over TLS only."""


def token_file(port: int) -> Path:
    """Where the server epochgate started on ``port`` keeps its token (absolute)."""
    return state_dir() / CONNECT_DIR / str(port) / TOKEN_FILE


def new_token(port: int) -> str:
    """A fresh random token for a server about to start on ``port``, written to its file with
    mode 0600 (an old file is replaced: a token is never reused by the next server)."""
    path = token_file(port)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    token = secrets.token_urlsafe(32)
    # Created 0600 at once, never readable by others even for an instant.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(token + "\n")
    return token


def read_token(port: int) -> str | None:
    """The token of the server epochgate started on ``port``, or ``None`` when there is none."""
    try:
        token = token_file(port).read_text().strip()
    except OSError:
        return None
    return token or None


def forget_token(port: int) -> None:
    """Remove the token file of a server that has stopped."""
    token_file(port).unlink(missing_ok=True)


def has_token(url: str) -> bool:
    """Whether ``url`` carries a token parameter.

    >>> has_token("sc://localhost:15002/;token=abc"), has_token("sc://localhost:15002")
    (True, False)
    """
    return any(p.split("=", 1)[0] == TOKEN_PARAM for p in url.split(";")[1:])


def redacted(url: str) -> str:
    """``url`` without its token, for messages and logs.

    >>> redacted("sc://localhost:15002/;user_id=me;token=abc")
    'sc://localhost:15002/;user_id=me'
    """
    base, *params = url.split(";")
    kept = [p for p in params if p.split("=", 1)[0] != TOKEN_PARAM]
    return ";".join([base, *kept])


def client_url(url: str, port: int) -> str:
    """The URL a client connects to ``url`` (whose port is ``port``) with: with the token of the
    server epochgate started on that port added when the server is on this machine and the
    caller gave none, and with ``127.0.0.1`` written ``localhost`` whenever a token goes to a
    loopback server (else PySpark would send it over TLS, which the server does not speak).

    ``url`` is returned unchanged when no token applies.
    """
    parts = urlsplit(url.split(";", 1)[0])
    if parts.hostname not in LOOPBACK_HOSTS:
        return url
    given = has_token(url) or bool(os.environ.get(TOKEN_ENV))
    token = None if given else read_token(port)
    if not given and token is None:
        return url
    base, *params = url.split(";")
    if parts.hostname != LOCAL_NAME:
        base = base.replace(f"//{parts.hostname}", f"//{LOCAL_NAME}", 1)
    if token is not None:
        if not base.endswith("/"):
            base += "/"
        params.append(f"{TOKEN_PARAM}={token}")
    return ";".join([base, *params])


def refusal_reason(said: str, port: int) -> str:
    """Why a server refused a client (``said``: the server's words), and where its token is."""
    return (
        f"the server refused the client: {said}; a server that epochgate spark start runs "
        f"keeps its token in {token_file(port)} (under $EPOCHGATE_HOME), else give the "
        f"server's token as ;token= in the URL or in ${TOKEN_ENV}"
    )
