"""asyncssh's connection callbacks: :class:`SSHClient` and :func:`create_connection`.

``conn, client = await create_connection(MyClient, host, port, **connect_args)``
(:func:`pssh.aio.connection.create_connection`) connects as :func:`~pssh.aio.connect`
does and tells a ``MyClient()`` of the connection's events: ``connection_made(conn)``,
``begin_auth(username)``, ``auth_completed()``, ``connection_lost(exc)``. The client may
also decide:

- ``validate_host_public_key(host, addr, port, key)``: asked when the host is not in
  known_hosts (instead of the ``accept-new`` policy): True accepts the key (it is not
  recorded), False refuses it (:class:`~pssh.aio.HostKeyNotVerifiable`). A key that
  changed or was revoked is refused without asking.
- ``public_key_auth_requested()``: once the keys given (or found) are refused, more to
  try: a key path, key data (bytes), or a list of them; None when there are no more.
- ``kbdint_auth_requested()`` (``""`` to take part) and
  ``kbdint_challenge_received(name, instructions, lang, prompts)`` (the answers);
- ``password_auth_requested()``: a password to try, None when there are no more.

These are asked only for methods the server offers, in asyncssh's order: public keys,
keyboard-interactive, password. A ``password=`` given to ``connect`` is tried before
``password_auth_requested``. ``auth_banner_received`` is never called: libssh2 does not
hand the banner to us.
"""
from __future__ import annotations

import base64
import inspect
import logging
from typing import List, Optional, Tuple

from pssh.known_hosts import fingerprint
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.aio.callbacks")


class SSHClient:
    """The client side's callbacks (asyncssh's ``SSHClient``): subclass it and override
    what you need; each default does nothing or declines."""

    def connection_made(self, conn) -> None:
        """The TCP connection is up (before the handshake and login)."""

    def connection_lost(self, exc: Optional[Exception]) -> None:
        """The connection closed (``exc``: why, when it failed or was lost)."""

    def debug_msg_received(self, msg: str, lang: str, always_display: bool) -> None:
        """Kept for asyncssh's interface (libssh2 does not report debug messages)."""

    def validate_host_public_key(self, host: str, addr: str, port: int, key) -> bool:
        """Whether to trust ``key`` (a :class:`HostKey`) for a host known_hosts does not list."""
        return False

    def validate_host_ca_key(self, host: str, addr: str, port: int, key) -> bool:
        """Kept for asyncssh's interface: host certificates are checked against known_hosts'
        ``@cert-authority`` lines."""
        return False

    def auth_banner_received(self, msg: str, lang: str) -> None:
        """Kept for asyncssh's interface: libssh2 does not hand the banner to us."""

    def begin_auth(self, username: str) -> None:
        """Logging in as ``username`` begins."""

    def auth_completed(self) -> None:
        """Logged in."""

    def public_key_auth_requested(self):
        """Another key to try (path, key data, or a list of them), or None."""
        return None

    def password_auth_requested(self) -> Optional[str]:
        """A password to try, or None."""
        return None

    def password_change_requested(self, prompt: str, lang: str):
        """Kept for asyncssh's interface: password changes are not supported."""
        return NotImplemented

    def password_changed(self) -> None:
        """Kept for asyncssh's interface."""

    def password_change_failed(self) -> None:
        """Kept for asyncssh's interface."""

    def kbdint_auth_requested(self) -> Optional[str]:
        """Submethods for keyboard-interactive login (``""``: any), or None to skip it."""
        return NotImplemented

    def kbdint_challenge_received(self, name: str, instructions: str, lang: str,
                                  prompts: List[Tuple[str, bool]]) -> Optional[List[str]]:
        """Answers to ``prompts`` (``(prompt, echo)`` pairs), or None to give up."""
        return None


class HostKey:
    """A server's host key as ``validate_host_public_key`` gets it: the parts of
    asyncssh's ``SSHKey`` a decision needs."""

    def __init__(self, blob: bytes) -> None:
        self.public_data = blob
        length = int.from_bytes(blob[:4], "big")
        self.algorithm = blob[4:4 + length]

    def get_algorithm(self) -> str:
        return self.algorithm.decode()

    def get_fingerprint(self, hash_name: str = "sha256") -> str:
        """``SHA256:...`` (or ``MD5:aa:bb:...``), as ``ssh-keygen -l`` shows it."""
        if hash_name == "sha256":
            return fingerprint(self.public_data)
        import hashlib  # here: loading OpenSSL's hashes costs every importer milliseconds
        digest = hashlib.new(hash_name, self.public_data)
        if hash_name == "md5":
            return "MD5:" + ":".join(f"{b:02x}" for b in digest.digest())
        return f"{hash_name.upper()}:" + base64.b64encode(digest.digest()).decode().rstrip("=")

    def export_public_key(self, format_name: str = "openssh") -> bytes:
        """The key as a known_hosts or authorized_keys line's ``type base64`` part."""
        return self.algorithm + b" " + base64.b64encode(self.public_data) + b"\n"

    def __eq__(self, other) -> bool:
        return isinstance(other, HostKey) and other.public_data == self.public_data

    def __hash__(self) -> int:
        return hash(self.public_data)


def _overrides(client, name: str) -> bool:
    """Whether ``client``'s class has its own ``name`` (not :class:`SSHClient`'s default)."""
    return client is not None and getattr(type(client), name, None) is not getattr(
        SSHClient, name)


def asks_host_keys(client) -> bool:
    """Whether unknown host keys go to ``client.validate_host_public_key``."""
    return _overrides(client, "validate_host_public_key")


def host_key_accepted(conn) -> bool:
    """The client's word on the connection's (unknown) host key."""
    blob = conn.session.hostkey()[0]
    peer = conn.get_extra_info("peername") or ("", conn.port)
    accepted = bool(conn._client.validate_host_public_key(conn.host, peer[0], conn.port,
                                                          HostKey(blob)))
    log.info("%s:%s: host key %s %s by the client's validate_host_public_key", conn.host,
             conn.port, fingerprint(blob), "accepted" if accepted else "refused")
    return accepted


async def _answer(result):
    return await result if inspect.isawaitable(result) else result


async def client_logins(conn, methods) -> bool:
    """The logins the client's callbacks (and ``password=``) supply, for the methods the
    server offers, in asyncssh's order; True once logged in. ``methods``: the core's
    :class:`~pssh.core.auth.LoginMethods` of the connection (what they try is added to
    its ``tried``)."""
    client = conn._client
    offered = await _offered_methods(conn)
    if offered is None:
        return True   # the server let us in without a method
    if "publickey" in offered:
        while (keys := await _answer(client.public_key_auth_requested())):
            for key in keys if isinstance(keys, (list, tuple)) else [keys]:
                if await _try(conn, methods.key(key)):
                    return True
    if "keyboard-interactive" in offered and _overrides(client, "kbdint_auth_requested"):
        if await _answer(client.kbdint_auth_requested()) not in (None, NotImplemented):
            if await _kbdint_login(conn, methods):
                return True
    if "password" in offered or "keyboard-interactive" in offered:
        password = conn._resolved.options.password
        if password is not None and await _password(conn, methods, password):
            return True
        if "password" in offered:
            while (password := await _answer(client.password_auth_requested())) is not None:
                if await _password(conn, methods, password):
                    return True
    return False


async def _try(conn, procedure) -> bool:
    """Run one login procedure of the core; False if the server refused it."""
    try:
        await conn._run(procedure)
    except ssh2_exc.PublickeyUnverifiedError as err:
        log.debug("%s: a key could not sign: %s", conn.host, err)
        return False
    except ssh2_exc.AuthenticationError as err:
        log.debug("%s: refused: %s", conn.host, err)
        return False
    return True


async def _password(conn, methods, password: str) -> bool:
    methods.creds.password = password
    return await _try(conn, methods.password())


async def _offered_methods(conn) -> Optional[List[str]]:
    """The methods the server still offers (None: already logged in)."""
    offered = await conn._call(conn.session.userauth_list, conn.username,
                               what="asking for the login methods")
    if not offered:
        return None if conn.session.userauth_authenticated() else []
    return list(offered)


async def _kbdint_login(conn, methods) -> bool:
    client = conn._client

    def respond(name: bytes, instruction: bytes, prompts) -> List[str]:
        answers = client.kbdint_challenge_received(
            name.decode(errors="replace"), instruction.decode(errors="replace"), "",
            [(str(p), bool(p.echo)) for p in prompts])
        if inspect.isawaitable(answers):
            close = getattr(answers, "close", None)  # a coroutine's: never to be awaited
            if close is not None:
                close()
            raise TypeError("kbdint_challenge_received must answer at once here "
                            "(libssh2 asks from inside its own call): not a coroutine")
        return list(answers) if answers is not None else []

    from pssh.core.login import Attempt
    attempt = Attempt(conn.session.userauth_keyboardinteractive_callback,
                      (conn.username, respond), "keyboard-interactive (client callback)",
                      sends_secret=True)
    try:
        return await _try(conn, methods.call(attempt))
    except ssh2_exc.SSH2Error as err:
        log.debug("%s: keyboard-interactive failed: %s", conn.host, err)
        return False
