"""State manager on ZooKeeper, through kazoo: one znode per topology, one child per key.

URL: ``zk://[user:password@]host:port[,host:port...]/root/path[?option=value&...]``, options
``session_timeout_secs`` (default 10) and ``connect_timeout_secs`` (default 5). Layout:
``<root>/<topology>/<key>``. A value is limited to about 1 MB (ZooKeeper's ``jute.maxbuffer``).

TMaster claim: ``claim_tmaster`` creates ``<root>/<topology>/tmaster`` as an EPHEMERAL node.
ZooKeeper deletes it when the session that created it ends: ``release_tmaster``, ``close``,
or session expiry — the holder's process died, or was cut off from ZooKeeper for longer than
the session timeout. Expiry is logged; the TMaster is not told, so after a long partition it
may still run without its claim, and a new claim can succeed meanwhile.

Access: with ``user:password`` the client authenticates with the ``digest`` scheme. Values
put with ``private=True`` (the topology secret) get an ACL that only that user can use; other
values (the plan, the TMaster location, checkpoints) stay readable by every client but only
that user may change or delete them, and so do the topology's node and the parents created
for it. Without credentials every node is open to any client of the ZooKeeper ensemble
(kazoo's default ACL): protect the ensemble itself, or use credentials.
"""

from __future__ import annotations

import logging
import threading
from urllib.parse import parse_qs, unquote, urlsplit

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry
from kazoo.security import make_acl, make_digest_acl

from heron_spark.config import STATEMGR
from heron_spark.errors import ConfigError, TopologyValueError
from heron_spark.statemgr.base import (
    TMASTER_LOCATION,
    TOPOLOGY,
    StateManager,
    check_name,
    claimed_error,
    split_secret,
)

log = logging.getLogger(__name__)

DEFAULT_PORT = 2181
DEFAULT_SESSION_TIMEOUT_SECS = 10.0
DEFAULT_CONNECT_TIMEOUT_SECS = 5.0
# jute.maxbuffer is 0xfffff bytes per packet by default; keep room for the path and header.
MAX_VALUE_BYTES = 1_000_000
_OPTIONS = ("session_timeout_secs", "connect_timeout_secs")
_URL_FORM = "zk://[user:password@]host:port[,host:port]/root[?session_timeout_secs=10]"


class ZooKeeperStateManager(StateManager):
    """``StateManager`` on a ZooKeeper ensemble; one kazoo session per object. Thread-safe.

    ``session_timeout_secs`` is requested from the server, which bounds it to 2..20 of its
    ``tickTime`` (4..40 s with the default tickTime of 2 s). ``connect_timeout_secs`` bounds
    the first connect; on timeout the constructor raises ``ConfigError`` naming the URL.
    Session events (connection suspended, session expired) are logged from kazoo's
    connection thread.
    """

    def __init__(self, hosts: str, root: str, *, user: str | None = None,
                 password: str | None = None,
                 session_timeout_secs: float = DEFAULT_SESSION_TIMEOUT_SECS,
                 connect_timeout_secs: float = DEFAULT_CONNECT_TIMEOUT_SECS) -> None:
        self.hosts = hosts
        self.root = "/" + root.strip("/")
        auth = f"{user}:***@" if user is not None else ""
        self._location = f"zk://{auth}{hosts}{self.root}"
        self._closed = False
        self._close_lock = threading.Lock()
        self._claims: dict[str, int] = {}   # topology -> session id that created the node
        self._claims_lock = threading.Lock()
        owner = None if user is None else make_digest_acl(user, password or "", all=True)
        self._private_acl = None if owner is None else [owner]
        # everyone reads, only the owner writes: the plan cannot be rewritten by another user
        self._public_acl = None if owner is None else [owner, make_acl("world", "anyone",
                                                                         read=True)]
        self._zk = KazooClient(
            hosts=hosts, timeout=session_timeout_secs,
            auth_data=[("digest", f"{user}:{password or ''}")] if user is not None else None,
            # kazoo's default reconnect backoff grows to an hour; cap it.
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
            command_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0,
                                     deadline=session_timeout_secs))
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=connect_timeout_secs)  # stops the client itself on timeout
        except KazooTimeoutError as exc:
            self._closed = True
            raise ConfigError(STATEMGR, self._location,
                              f"no ZooKeeper server answered at {hosts} within "
                              f"{connect_timeout_secs} s; start ZooKeeper there, or correct the "
                              f"hosts in {_URL_FORM}") from exc

    @classmethod
    def from_url(cls, url: str) -> "ZooKeeperStateManager":
        """Connect to the ensemble a ``zk://`` URL names (see the module docstring)."""
        return cls(**parse_url(url))

    @property
    def location(self) -> str:
        """Return the ``zk://`` URL of this store, without its password."""
        return self._location

    def _path(self, topology: str, key: str | None = None) -> str:
        folder = f"{self.root}/{check_name('topology', topology)}"
        return folder if key is None else f"{folder}/{check_name('key', key)}"

    def _retry(self, func, *args, **kwargs):
        """Call ``func`` again on connection loss, up to the session timeout.

        Thread-safe: kazoo's ``retry`` copies its ``KazooRetry`` on every call.
        """
        return self._zk.retry(func, *args, **kwargs)

    def _session_id(self) -> int | None:
        client_id = self._zk.client_id
        return client_id[0] if client_id else None

    def _live_session_id(self) -> int:
        """Return the session id just after a write succeeded in it.

        Raise kazoo's ConnectionLoss (which ``_retry`` retries) if the session is gone already.
        """
        session = self._session_id()
        if session is None:
            msg = "the ZooKeeper session ended right after a write in it"
            raise ConnectionLoss(msg)
        return session

    # key/value -----------------------------------------------------------------------------
    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        """Create or overwrite ``<root>/<topology>/<key>`` (an existing node keeps its kind)."""
        path = self._path(topology, key)
        if len(value) > MAX_VALUE_BYTES:
            msg = "value too large for a ZooKeeper node"
            raise TopologyValueError(
                msg, value=f"{path}: {len(value)} bytes",
                kind="too_large",
                fix=f"keep state values under {MAX_VALUE_BYTES} bytes (large objects held by "
                    f"components are pickled into the topology), or use a file:// state manager")
        acl = self._private_acl if private else self._public_acl
        try:
            self._retry(self._put, path, value, acl)
        except NoAuthError as exc:
            raise self._no_auth(path, "only changed by") from exc

    def _put(self, path: str, value: bytes, acl) -> None:
        while True:
            try:
                self._zk.create(path, value, acl=acl, makepath=True)
                return
            except NodeExistsError:
                pass
            try:
                if acl is not None and acl is self._private_acl:
                    # before the data: the new value is never more visible
                    self._zk.set_acls(path, acl)
                self._zk.set(path, value)
                return
            except NoNodeError:  # deleted in between: create it again
                continue

    def get(self, topology: str, key: str) -> bytes | None:
        """Return the data of ``<root>/<topology>/<key>``, or None if there is no such node."""
        path = self._path(topology, key)
        try:
            data, _stat = self._retry(self._zk.get, path)
        except NoNodeError:
            return None
        except NoAuthError as exc:
            raise self._no_auth(path) from exc
        return data or b""

    def keys(self, topology: str) -> list[str]:
        """Return the children of the topology's node, sorted."""
        try:
            return sorted(self._retry(self._zk.get_children, self._path(topology)))
        except NoNodeError:
            return []

    def delete(self, topology: str, key: str) -> None:
        """Delete the node ``<root>/<topology>/<key>`` if it exists."""
        try:
            self._retry(self._zk.delete, self._path(topology, key))
        except NoNodeError:
            pass

    def delete_topology(self, topology: str) -> None:
        """Delete the topology's node and its children, the ephemeral TMaster claim too."""
        path = self._path(topology)
        with self._claims_lock:
            self._claims.pop(topology, None)
        for _ in range(10):
            try:
                self._retry(self._zk.delete, path, recursive=True)
                return
            except NoNodeError:
                return
            except NotEmptyError:  # a key was written during the delete; go again
                continue
        msg = f"{path} keeps getting new children; stop its TMaster first"
        raise NotEmptyError(msg)

    def topologies(self) -> list[str]:
        """Return the children of the root node that hold a ``topology`` node, sorted."""
        try:
            names = self._retry(self._zk.get_children, self.root)
        except NoNodeError:
            return []
        return sorted(n for n in names
                      if self._retry(self._zk.exists, f"{self.root}/{n}/{TOPOLOGY}") is not None)

    def _no_auth(self, path: str, access: str = "private to") -> ConfigError:
        return ConfigError(STATEMGR, self._location,
                           f"{path} is {access} the ZooKeeper user that wrote it; use that "
                           f"user's credentials: zk://user:password@{self.hosts}{self.root}")

    # TMaster claim -------------------------------------------------------------------------
    def claim_tmaster(self, topology: str, location: dict) -> None:
        """Create the EPHEMERAL ``tmaster`` node (see ``StateManager.claim_tmaster``).

        A persistent ``tmaster`` node (written by ``set_tmaster_location`` or ``put``) is a
        record without a holder: it is replaced atomically.
        """
        path = self._path(topology, TMASTER_LOCATION)
        value, private = split_secret(location)
        with self._claims_lock:
            held = self._claims.get(topology)
            if held is not None and held == self._session_id():
                stat = self._retry(self._zk.exists, path)
                if stat is not None and stat.ephemeralOwner == held:
                    raise claimed_error(topology, self._location)
            self._claims[topology] = self._retry(self._claim, topology, path, value)
        for key, text in private.items():
            self.put(topology, key, text.encode(), private=True)

    def _claim(self, topology: str, path: str, value: bytes) -> int:
        """Create the ephemeral node; return the owning session id. Safe to retry."""
        acl = self._public_acl
        self._zk.ensure_path(path.rsplit("/", 1)[0], acl=acl)
        while True:
            try:
                self._zk.create(path, value, acl=acl, ephemeral=True)
                return self._live_session_id()
            except NodeExistsError:
                pass
            stat = self._zk.exists(path)
            if stat is None:
                continue  # released in between
            owner = stat.ephemeralOwner
            if owner and owner == self._session_id():
                # Our own create, retried after a connection loss hid its reply.
                self._zk.set(path, value)
                return owner
            if owner:
                raise claimed_error(topology, self._location)
            tx = self._zk.transaction()
            tx.delete(path, version=stat.version)
            tx.create(path, value, acl=acl, ephemeral=True)
            if not any(isinstance(result, Exception) for result in tx.commit()):
                return self._live_session_id()

    def release_tmaster(self, topology: str) -> None:
        """Delete the ephemeral ``tmaster`` node if this object's session still owns it."""
        path = self._path(topology, TMASTER_LOCATION)
        with self._claims_lock:
            owner = self._claims.pop(topology, None)
            if owner is None or self._closed:
                return
            try:
                stat = self._retry(self._zk.exists, path)
                if stat is not None and stat.ephemeralOwner == owner:
                    self._retry(self._zk.delete, path, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass  # gone, or replaced by a new holder after our session expired

    # lifecycle -----------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        """Kazoo listener, on its connection thread: log, never block."""
        if self._closed:
            return
        if state == KazooState.SUSPENDED:
            log.warning("lost the connection to ZooKeeper %s; reconnecting (the session and its "
                        "TMaster claims survive if it is back within the session timeout)",
                        self._location)
        elif state == KazooState.LOST:
            claims = sorted(self._claims.copy())
            log.error("ZooKeeper session of %s expired or closed: the ephemeral TMaster claims "
                      "of %s are gone; kazoo opens a new session", self._location,
                      claims or "no topology")
        elif state == KazooState.CONNECTED:
            log.info("connected to ZooKeeper %s", self._location)

    def close(self) -> None:
        """End the session (its ephemeral claims vanish at once) and stop kazoo; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._claims.clear()
        try:
            self._zk.stop()
        finally:
            self._zk.close()


def parse_url(url: str) -> dict:
    """Return the ``ZooKeeperStateManager`` arguments of a ``zk://`` URL; ConfigError if bad."""
    def bad(fix: str) -> ConfigError:
        return ConfigError(STATEMGR, _mask(url), f"{fix}; use {_URL_FORM}")

    try:
        parsed = urlsplit(url)
    except ValueError as exc:
        raise bad(str(exc)) from exc
    if parsed.scheme != "zk":
        msg = "the scheme must be zk://"
        raise bad(msg)
    userinfo, has_auth, hostlist = parsed.netloc.rpartition("@")
    args: dict = {}
    if has_auth:
        user, has_password, password = userinfo.partition(":")
        if not user or not has_password:
            msg = "give both user and password, as user:password@"
            raise bad(msg)
        args.update(user=unquote(user), password=unquote(password))
    hosts = []
    for entry in hostlist.split(","):
        host, port = _split_host(entry)
        if not host or not 0 < port < 65536:
            msg = f"bad host:port {entry!r}"
            raise bad(msg)
        hosts.append(f"{host}:{port}")
    root = parsed.path.strip("/")
    if not root or any(part in ("", ".", "..") for part in root.split("/")):
        msg = "give a root path for heron_spark's nodes, such as /heron"
        raise bad(msg)
    args.update(hosts=",".join(hosts), root="/" + root)
    for option, values in parse_qs(parsed.query, keep_blank_values=True).items():
        if option not in _OPTIONS:
            msg = f"unknown option {option!r} (known: {', '.join(_OPTIONS)})"
            raise bad(msg)
        try:
            args[option] = float(values[-1])
        except ValueError:
            args[option] = -1.0
        if args[option] <= 0:
            msg = f"{option} must be a positive number of seconds"
            raise bad(msg)
    return args


def _split_host(entry: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6]:port`` -> (host, port); port -1 if it is not a number."""
    entry = entry.strip()
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        host, port = f"[{host}]", rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = entry.partition(":")
    if not port:
        return host, DEFAULT_PORT
    return host, int(port) if port.isdigit() else -1


def _mask(url: str) -> str:
    """``url`` with the password replaced by ``***``."""
    head, sep, rest = url.partition("://")
    userinfo, at, tail = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{head}{sep}{userinfo.split(':', 1)[0]}:***@{tail}"
