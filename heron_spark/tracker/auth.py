"""Who may use a tracker: a Bearer token for scripts, one-time login links and a session cookie for browsers.

- **The tracker token** (random, 256 bits) lives in the state manager under the pseudo
  topology ``__tracker__``, key ``token``, owner-only (``private``). Every tracker of that
  state manager uses it; ``tracker_token`` creates it on first use. Scripts send
  ``Authorization: Bearer <token>``.
- **Login links** (as Jupyter's): ``/login?token=<nonce>.<expiry>.<mac>``, the MAC an
  HMAC-SHA256 of nonce and expiry under the tracker token, so anyone who can read the token
  (the state manager's owner: ``heron-spark ui``, ``handle.ui_link()``) can mint one and any
  tracker of the state manager accepts it. A link expires after ``LOGIN_LINK_TTL_SECS`` and
  is spent on first use (the tracker remembers spent nonces until they expire).
- **Sessions**: a good link sets the cookie ``heron_spark_session`` (HttpOnly,
  SameSite=Strict, Secure over HTTPS, signed the same way, valid ``SESSION_TTL_SECS``), then
  redirects to ``/``.
- **CSRF**: a POST authenticated by the cookie must carry the header
  ``X-Heron-Spark-Request`` (a cross-site form cannot set it, and a cross-site script needs a
  CORS preflight the tracker never grants) and, if the browser sends ``Origin``, an Origin
  whose host is the request's ``Host``. A POST with a Bearer token needs neither.

``Authenticator`` is thread-safe (one lock around the spent nonces); time comes from an
injected clock.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from typing import Callable
from urllib.parse import urlsplit

from heron_spark.errors import HeronSparkError
from heron_spark.statemgr.base import StateManager
from heron_spark.wire.auth import new_secret

TRACKER_KEYSPACE = "__tracker__"  # pseudo topology holding the tracker's token and locations
TOKEN_KEY = "token"
LOCATION_PREFIX = "location."
LOGIN_LINK_TTL_SECS = 600.0
SESSION_TTL_SECS = 12 * 3600.0
SESSION_COOKIE = "heron_spark_session"
CSRF_HEADER = "X-Heron-Spark-Request"
SPENT_MAX = 100_000  # unexpired spent login nonces kept at most (beyond: logins refused)


def tracker_token(statemgr: StateManager) -> str:
    """Return the state manager's tracker token, creating it (owner-only) if there is none."""
    raw = statemgr.get(TRACKER_KEYSPACE, TOKEN_KEY)
    if raw:
        return raw.decode()
    statemgr.put(TRACKER_KEYSPACE, TOKEN_KEY, new_secret().encode(), private=True)
    raw = statemgr.get(TRACKER_KEYSPACE, TOKEN_KEY)  # another writer may have won
    if raw is None:
        msg = (f"the tracker token was deleted from the state manager right after it was "
               f"written ({TRACKER_KEYSPACE}/{TOKEN_KEY}). Fix: run the command again")
        raise HeronSparkError(msg)
    return raw.decode()


def _mac(token: str, kind: str, nonce: str, expiry: int) -> str:
    return hmac.new(token.encode(), f"{kind}|{nonce}|{expiry}".encode(),
                    hashlib.sha256).hexdigest()


def _signed(token: str, kind: str, ttl_secs: float, now: float) -> str:
    nonce = os.urandom(16).hex()
    expiry = int(now + ttl_secs)
    return f"{nonce}.{expiry}.{_mac(token, kind, nonce, expiry)}"


def _verify(token: str, kind: str, value: str, now: float) -> tuple[str, int] | None:
    """Return (nonce, expiry) of a good unexpired ``value`` signed with ``token``, else None."""
    nonce, _, rest = value.partition(".")
    expiry_text, _, mac = rest.partition(".")
    if not (nonce and expiry_text.isdigit() and mac):
        return None
    expiry = int(expiry_text)
    if expiry < now or not hmac.compare_digest(mac, _mac(token, kind, nonce, expiry)):
        return None
    return nonce, expiry


def login_token(token: str, now: float | None = None) -> str:
    """Mint a one-time login token with the tracker ``token`` (for ``/login?token=``)."""
    return _signed(token, "login", LOGIN_LINK_TTL_SECS, time.time() if now is None else now)


def login_link(base_url: str, token: str) -> str:
    """Return a fresh one-time login link to the tracker at ``base_url``."""
    return f"{base_url.rstrip('/')}/login?token={login_token(token)}"


class Authenticator:
    """Checks requests against the tracker token; spends login links; signs sessions.

    ``token`` returns the current tracker token (re-read after a failed check, at most once
    a second, in case another tracker created it first). Thread-safe.
    """

    def __init__(self, token: Callable[[], str], clock: Callable[[], float] = time.time,
                 secure: bool = False) -> None:
        self.secure = secure  # served over HTTPS: the session cookie is ``Secure``
        self._load = token
        self._token = token()
        self._clock = clock
        self._lock = threading.Lock()
        self._spent: dict[str, int] = {}  # nonce -> expiry
        self._reloaded_at = clock()

    @property
    def token(self) -> str:
        """Return the tracker's current Bearer token."""
        return self._token

    def _tokens(self) -> list[str]:
        now = self._clock()
        if now - self._reloaded_at >= 1.0:
            self._reloaded_at = now
            self._token = self._load()
        return [self._token]

    def bearer_ok(self, authorization: str) -> bool:
        """Return whether the ``Authorization`` header carries the tracker token."""
        given = authorization.encode()
        if hmac.compare_digest(given, f"Bearer {self._token}".encode()):
            return True
        return any(hmac.compare_digest(given, f"Bearer {t}".encode()) for t in self._tokens())

    def session_ok(self, cookie_header: str) -> bool:
        """Return whether the ``Cookie`` header holds a good, unexpired session cookie."""
        value = _cookie(cookie_header, SESSION_COOKIE)
        if not value:
            return False
        now = self._clock()
        return _verify(self._token, "session", value, now) is not None or any(
            _verify(t, "session", value, now) for t in self._tokens())

    def spend_login(self, value: str) -> bool:
        """Accept the login token ``value`` once.

        True the first time, False ever after (or if it is forged or expired).
        """
        now = self._clock()
        verified = _verify(self._token, "login", value, now)
        if verified is None:
            verified = next((v for t in self._tokens()
                             if (v := _verify(t, "login", value, now))), None)
        if verified is None:
            return False
        nonce, expiry = verified
        with self._lock:
            self._spent = {n: e for n, e in self._spent.items() if e >= now}
            if nonce in self._spent or len(self._spent) >= SPENT_MAX:
                return False
            self._spent[nonce] = expiry
        return True

    def session_cookie(self) -> str:
        """Return a ``Set-Cookie`` value for a new session."""
        value = _signed(self._token, "session", SESSION_TTL_SECS, self._clock())
        return (f"{SESSION_COOKIE}={value}; Path=/; Max-Age={int(SESSION_TTL_SECS)}; "
                f"HttpOnly; SameSite=Strict{'; Secure' if self.secure else ''}")


def csrf_ok(headers: dict[str, str]) -> bool:
    """Return whether a cookie-authenticated POST comes from the tracker's own pages.

    True if a cookie-authenticated POST proves it comes from the tracker's own pages: the
    ``X-Heron-Spark-Request`` header, and an ``Origin`` (if any) on the request's ``Host``.
    """
    if not headers.get(CSRF_HEADER.lower()):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == headers.get("host", "")


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""
