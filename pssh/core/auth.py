"""Logging in: the order of login methods, each method, and retries.

The order, for both front ends:

1. keys given explicitly (``pkey`` / ``client_keys``): those, and nothing else
   but the password, which follows them only when it is not standing in as the
   keys' passphrase (parallel-ssh uses ``password`` for the passphrase when no
   ``passphrase`` is given; asyncssh never does);
2. otherwise: the SSH agent (``allow_agent``), then the identity files
   (``identity_auth``: the ssh config's IdentityFiles, else
   :data:`DEFAULT_IDENTITIES` that exist), then the password if there is one.

A method that fails moves on to the next; a timeout, a lost connection or a
key file that cannot be used (:class:`~pssh.exceptions.PKeyFileError`) ends
the login at once. :func:`login_retrying` repeats a failed login on the same
connection ``num_retries`` times.

The methods are looked up on a ``methods`` object (:class:`LoginMethods` by
default): parallel-ssh's client maps them onto its overridable ``_agent_auth``,
``_identity_auth`` ... so that programs which replace those keep working.
"""
from __future__ import annotations

import logging
import os
from typing import List, NamedTuple, Optional, Protocol, Sequence, Type, Union

from pssh.core import errors as exc
from pssh.core.handshake import Attempt
from pssh.core.link import Link
from pssh.core.waits import Procedure, Sleep
from pssh.core.keys import inspect_key, inspect_key_file
from pssh.core.login import (Attempt as LoginCall, accepted, agent_attempts, disconnect_agent,
                        key_data_attempt, key_errors, key_file_attempts, password_attempt)
from pssh.core.settings import Resolved
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.core.auth")

#: Key files tried when none is given and the ssh config names none (OpenSSH's order).
DEFAULT_IDENTITIES = tuple(os.path.expanduser(os.path.join("~", ".ssh", name))
                           for name in ("id_rsa", "id_ecdsa", "id_ed25519", "id_dsa"))

Key = Union[str, bytes]
_FATAL = (exc.Timeout, exc.ConnectionError, exc.PKeyFileError)


class Credentials:
    """Who logs in and with what: the settings of :func:`login` for one connection."""

    __slots__ = ("user", "keys", "password", "passphrase", "allow_agent", "agent_path",
                 "identity_auth", "identities", "keyboard_interactive", "cert_file")

    def __init__(self, user: str, keys: Sequence[Key] = (), password: Optional[str] = None,
                 passphrase: Optional[str] = None, allow_agent: bool = True,
                 agent_path: Optional[str] = None, identity_auth: bool = True,
                 identities: Sequence[str] = DEFAULT_IDENTITIES,
                 keyboard_interactive: bool = False, cert_file: Optional[str] = None) -> None:
        self.user = user
        self.keys = tuple(keys)
        self.password = password
        self.passphrase = passphrase
        self.allow_agent = allow_agent
        self.agent_path = agent_path
        self.identity_auth = identity_auth
        self.identities = tuple(identities)
        self.keyboard_interactive = keyboard_interactive
        self.cert_file = cert_file

    @classmethod
    def of(cls, resolved: Resolved) -> "Credentials":
        """The login a host's resolved settings (:class:`~pssh.options.Resolved`) ask
        for: its ``pkey``, password, agent, identity files (the ssh config's, else
        :data:`DEFAULT_IDENTITIES`), keyboard-interactive and certificate."""
        o = resolved.options
        return cls(resolved.user, keys=(o.pkey,) if o.pkey else (), password=o.password,
                   passphrase=o.passphrase, allow_agent=bool(o.allow_agent),
                   identity_auth=bool(o.identity_auth),
                   identities=resolved.identity_files or DEFAULT_IDENTITIES,
                   keyboard_interactive=bool(o.keyboard_interactive),
                   cert_file=resolved.cert_file)

    @property
    def key_passphrase(self) -> str:
        """The passphrase for keys: ``passphrase``, else the password (parallel-ssh)."""
        if self.passphrase is not None:
            return self.passphrase
        return self.password or ""

    @property
    def password_after_keys(self) -> bool:
        """Whether the password is a login of its own after explicit keys."""
        return self.password is not None and self.passphrase is not None


class KeyErrors(NamedTuple):
    """The exception classes a front end raises for unusable private keys (its API's:
    asyncssh has one per case, parallel-ssh one for all)."""

    missing: Type[Exception] = exc.PKeyFileError      # no such file
    unreadable: Type[Exception] = exc.PKeyFileError   # a directory, not a key, damaged
    encrypted: Type[Exception] = exc.PKeyFileError    # encrypted, no passphrase given
    passphrase: Type[Exception] = exc.PKeyFileError   # the passphrase does not open it


class Logins(Protocol):
    """The login methods :func:`login` tries, each a procedure that returns once logged
    in and raises otherwise: :class:`LoginMethods`, or a front end's own (parallel-ssh's
    client routes them through its overridable methods)."""

    def key(self, key: Key) -> Procedure[None]: ...

    def agent(self) -> Procedure[None]: ...

    def identities(self) -> Procedure[None]: ...

    def password(self) -> Procedure[None]: ...


class LoginMethods:
    """Each login method as a procedure on ``link`` (``True``: logged in)."""

    def __init__(self, link: Link, creds: Credentials, attempt: Attempt,
                 errors: KeyErrors = KeyErrors()) -> None:
        self.link = link
        self.creds = creds
        self.attempt = attempt
        self.errors = errors
        #: What was tried, for the final error ("key /x", "agent key me@host", ...).
        self.tried: List[str] = []

    def call(self, login: LoginCall) -> Procedure[None]:
        """Make one login call; ``AuthenticationError`` unless it logged us in."""
        if login.sends_secret and not self.link.host_key_verified:
            # OpenSSH's rule for a host let through with a changed key: an impostor
            # must not learn the password.
            raise exc.AuthenticationError.at(
                self.link.host, self.link.port, f"{login.what} login is disabled: the host "
                f"key did not verify, and it would go to whoever holds that key")
        self.tried.append(login.what)
        yield from self.link.call(login.call, *login.args, timeout=self.attempt.left(),
                                  what=login.what)
        if not accepted(self.link.live_session):
            # A partial success: the server wants another method as well.
            raise ssh2_exc.AuthenticationError(f"{login.what}: the server asks for more "
                                               f"methods")

    def key(self, key: Key) -> Procedure[None]:
        """A key file (its certificate first) or key data in memory."""
        if isinstance(key, (bytes, bytearray)):
            yield from self.key_data(bytes(key))
        else:
            yield from self.key_file(os.path.expanduser(os.fspath(key)))

    def key_file(self, path: str) -> Procedure[None]:
        creds, link, errors = self.creds, self.link, self.errors
        passphrase = creds.key_passphrase
        try:
            try:
                info = inspect_key_file(path)
            except exc.PKeyFileError as err:
                if not os.path.exists(path):   # looked at only when it failed
                    raise errors.missing("private key file %s does not exist", path) from None
                if errors.unreadable is exc.PKeyFileError:
                    raise
                raise errors.unreadable(*err.args) from None
            name = f"private key file {path}"
            if info.encrypted and not passphrase:
                raise errors.encrypted("%s is encrypted: give its passphrase (passphrase=)"
                                       % name)
            with key_errors(info, name, passphrase, error=errors.passphrase):
                *certificates, key = key_file_attempts(link.live_session, creds.user, path,
                                                       passphrase, creds.cert_file)
                for login in certificates:
                    try:
                        return (yield from self.call(login))
                    except ssh2_exc.AuthenticationError as err:
                        log.debug("%s: %s refused: %s", link.host, login.what, err)
                yield from self.call(key)
        except exc.PSSHError as err:
            _at(err, link)  # names the host on ``err`` itself, which goes on as it was
            raise

    def key_data(self, data: bytes) -> Procedure[None]:
        # Key data is not a file: with parallel-ssh's errors its problems are failed
        # logins (retried and reported as AuthenticationError, as parallel-ssh does),
        # said plainly; a front end with errors of its own gets those.
        creds, errors = self.creds, self.errors
        own = errors != KeyErrors()
        failed = ssh2_exc.AuthenticationError
        name = "the private key given in memory"
        passphrase = creds.key_passphrase
        info = inspect_key(data, name, error=errors.unreadable if own else failed)
        if info.encrypted and not passphrase:
            raise (errors.encrypted if own else failed)(
                "%s is encrypted: give its passphrase (passphrase=)" % name)
        with key_errors(info, name, passphrase, error=errors.passphrase if own else failed):
            yield from self.call(key_data_attempt(self.link.live_session, creds.user, data,
                                                  passphrase))

    def agent(self) -> Procedure[None]:
        """The first key of the SSH agent that the server accepts."""
        session = self.link.live_session
        agent = session.agent_init()
        if self.creds.agent_path:
            agent.set_identity_path(self.creds.agent_path)
        agent.connect()
        try:
            for login in agent_attempts(session, agent, self.creds.user):
                try:
                    return (yield from self.call(login))
                except ssh2_exc.PublickeyUnverifiedError:
                    raise
                except ssh2_exc.AuthenticationError:
                    continue
            raise ssh2_exc.AgentAuthenticationError(
                f"no key of the SSH agent was accepted for {self.creds.user!r}")
        finally:
            disconnect_agent(agent)

    def identities(self) -> Procedure[None]:
        """The first identity file (that exists) the server accepts."""
        for path in self.creds.identities:
            if not os.path.isfile(path):
                continue
            try:
                yield from self.key_file(path)
            except _FATAL[:2]:
                raise
            except Exception as err:
                log.debug("%s: identity %s failed: %s", self.link.host, path, err)
                continue
            log.debug("%s: logged in with identity %s", self.link.host, path)
            return
        raise exc.AuthenticationError.at(self.link.host, self.link.port,
                                         "no identity file was accepted")

    def password(self) -> Procedure[None]:
        creds = self.creds
        assert creds.password is not None  # login() tries this method only with a password
        yield from self.call(password_attempt(self.link.live_session, creds.user, creds.password,
                                              creds.keyboard_interactive))


def login(link: Link, creds: Credentials, methods: Logins) -> Procedure[None]:
    """Log in with the methods in the order this module describes; raises
    :class:`~pssh.exceptions.AuthenticationError` (naming the host and what was tried)
    when none is accepted."""
    if creds.keys:
        for key in creds.keys[:-1]:
            try:
                return (yield from methods.key(key))
            except _FATAL:
                raise
            except Exception as err:
                log.debug("%s: key %s refused: %s", link.host, _name(key), err)
        if not creds.password_after_keys:
            return (yield from methods.key(creds.keys[-1]))
        try:
            return (yield from methods.key(creds.keys[-1]))
        except _FATAL:
            raise
        except Exception as err:
            log.debug("%s: key %s refused: %s", link.host, _name(creds.keys[-1]), err)
        return (yield from methods.password())
    if creds.allow_agent:
        try:
            return (yield from methods.agent())
        except (ssh2_exc.AgentError, ssh2_exc.AuthenticationError) as err:
            log.debug("%s: agent login failed: %s", link.host, err)
        except _FATAL[:2]:
            raise
        except Exception as err:
            log.error("%s: agent login failed: %r", link.host, err)
    if creds.identity_auth:
        try:
            return (yield from methods.identities())
        except exc.AuthenticationError:
            if creds.password is None:
                raise
    if creds.password is None:
        raise exc.AuthenticationError.at(link.host, link.port,
                                         "no authentication method left to try")
    yield from methods.password()


def login_retrying(link: Link, creds: Credentials, methods: Logins, attempt: Attempt,
                   num_retries: Optional[int], retry_delay: Optional[float],
                   first_try: int = 1
                   ) -> Procedure[None]:
    """:func:`login`, tried again on the same connection after a failure, at most
    ``num_retries`` times in all (a timeout, lost connection or unusable key file is
    final at once). The last failure is raised as parallel-ssh raises it:
    ``AuthenticationError(message, host, port, cause, try, of tries)``."""
    tries = max(1, num_retries or 1, first_try)
    for try_no in range(first_try, tries + 1):
        if try_no > first_try:
            attempt.start()  # a new login attempt on the same connection
        try:
            return (yield from login(link, creds, methods))
        except _FATAL:
            raise
        except Exception as err:
            if try_no < tries:
                yield Sleep(retry_delay or 0.0)
                continue
            user = creds.user.replace("%", "%%")
            raise exc.AuthenticationError(
                f"%s:%s: authentication as {user!r} failed: %s (try %s of %s)",
                link.host, link.port, err, try_no, tries,
                host=link.host, port=link.port) from err


def _name(key: Key) -> str:
    return "in memory" if isinstance(key, (bytes, bytearray)) else str(key)


def _at(err: exc.PSSHError, link: Link) -> exc.PSSHError:
    """``err``, naming the host it happened on if it does not yet (key problems are found
    by code that does not know the host; ``str()`` then leads with ``host:port``)."""
    return exc.with_host(err, link.host, link.port)


__all__ = ["Credentials", "DEFAULT_IDENTITIES", "KeyErrors", "LoginMethods", "Logins", "login",
           "login_retrying"]
