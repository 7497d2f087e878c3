"""``SSHClient``: one host, on gevent, with every libssh2 call non-blocking.

Each call that would block returns EAGAIN from the bindings; the client then
waits on the socket in the direction libssh2 asks for, letting other
greenlets run. Timeouts (one model, seconds):

* ``timeout``: connecting, the handshake, authentication, and each wait for a
  reply to a request (opening a channel, starting a command, closing);
* ``read_timeout`` (per command): no output for that long raises ``Timeout``;
* ``join(timeout=...)``: how long to wait for commands to finish.

Connection failures (refused, reset, unreachable) are retried ``num_retries``
times with exponential backoff and jitter; timeouts and rejected logins are
never retried.
"""
from __future__ import annotations

import getpass
import logging
import os
import random
import shlex
import socket
from typing import Optional, Union

import gevent
from gevent import socket as gsocket
from gevent.event import Event
from gevent.hub import get_hub

from pssh import exceptions as exc
from pssh.clients.native.transfer import TransferMixin
from pssh.known_hosts import verify_host_key
from pssh.output import HostOutput
from pssh.reader import ChannelReader
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND, Session

log = logging.getLogger("pssh.client")

DEFAULT_RETRIES = 3
DEFAULT_RETRY_DELAY = 1.0
IDENTITY_FILES = ("id_ed25519", "id_ecdsa", "id_rsa")
_READ, _WRITE = 1, 2  # libev event bits


class HostLog(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.extra['host']}: {msg}", kwargs


class SSHClient(TransferMixin):
    """An SSH connection to one host (connects and authenticates on creation)."""

    def __init__(self, host: str, user: Optional[str] = None, password: Optional[str] = None,
                 port: Optional[int] = None, pkey: Union[str, bytes, None] = None,
                 alias: Optional[str] = None, num_retries: int = DEFAULT_RETRIES,
                 retry_delay: float = DEFAULT_RETRY_DELAY, allow_agent: bool = True,
                 timeout: Optional[float] = None, identity_auth: bool = True,
                 keepalive_seconds: int = 60, known_hosts: Optional[str] = None,
                 host_key_policy: str = "accept-new", keyboard_interactive: bool = False,
                 passphrase: Optional[str] = None) -> None:
        self.host = host
        self.port = port or 22
        self.user = user or getpass.getuser()
        self.password = password
        self.pkey = pkey
        self.passphrase = passphrase
        self.alias = alias
        self.num_retries = num_retries
        self.retry_delay = retry_delay
        self.allow_agent = allow_agent
        self.timeout = timeout
        self.identity_auth = identity_auth
        self.keepalive_seconds = keepalive_seconds
        self.known_hosts = known_hosts
        self.host_key_policy = host_key_policy
        self.keyboard_interactive = keyboard_interactive
        self.log = HostLog(log, {"host": f"{host}:{self.port}"})
        self.sock: Optional[socket.socket] = None
        self.session: Optional[Session] = None
        self._hub = get_hub()
        self._waiters: set = set()
        self._connect()
        try:
            self._verify_host_key()
            self._authenticate()
        except BaseException:
            self.disconnect()
            raise
        if keepalive_seconds:
            self.session.keepalive_config(False, keepalive_seconds)

    # -- waiting ---------------------------------------------------------------

    def wait(self, timeout: Optional[float], what: str = "waiting for the server") -> None:
        """Wait on the socket in the direction libssh2 is blocked on.

        Also returns early when another greenlet using this session made
        progress (:meth:`wake`): its libssh2 call may have read packets for
        us off the socket, which would then never become readable for them.
        """
        directions = self.session.block_directions()
        events = ((_READ if directions & LIBSSH2_SESSION_BLOCK_INBOUND else 0)
                  | (_WRITE if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND else 0)) or _READ
        ready = Event()
        watcher = self._hub.loop.io(self.sock.fileno(), events)
        watcher.start(ready.set)
        self._waiters.add(ready)
        try:
            if not ready.wait(timeout):
                raise exc.Timeout(f"{what}: nothing within {timeout} s", self.host, self.port)
        finally:
            self._waiters.discard(ready)
            watcher.stop()
            watcher.close()

    def wake(self) -> None:
        """Tell greenlets waiting on this session to retry (call after progress)."""
        for ready in tuple(self._waiters):
            ready.set()

    def retry_eagain(self, fn, *args, timeout: Optional[float] = None, what: str = ""):
        """Call ``fn`` until it stops returning EAGAIN, waiting on the socket between tries."""
        timeout = self.timeout if timeout is None else timeout
        while True:
            result = fn(*args)
            if type(result) is int and result == LIBSSH2_ERROR_EAGAIN:
                self.wait(timeout, what or getattr(fn, "__name__", "waiting"))
                continue
            self.wake()
            return result

    # -- connection ------------------------------------------------------------

    def _connect(self) -> None:
        for attempt in range(self.num_retries + 1):
            try:
                self.sock = gsocket.create_connection((self.host, self.port), timeout=self.timeout)
                break
            except socket.gaierror as err:
                raise exc.UnknownHostError(f"cannot resolve host name: {err.strerror}",
                                           self.host, self.port) from None
            except socket.timeout:
                raise exc.Timeout(f"connecting timed out after {self.timeout} s",
                                  self.host, self.port) from None
            except OSError as err:
                if attempt == self.num_retries:
                    raise exc.ConnectionError(
                        f"cannot connect: {err.strerror or err} (after {attempt + 1} attempts)",
                        self.host, self.port) from None
                delay = self.retry_delay * (2 ** attempt) * random.uniform(0.5, 1.5)
                self.log.debug("connect failed (%s), retrying in %.2f s", err, delay)
                gevent.sleep(delay)
        self.session = Session()
        self.session.set_blocking(False)
        try:
            self.retry_eagain(self.session.handshake, self.sock, what="SSH handshake")
        except ssh2_exc.SSH2Error as err:
            self.disconnect()
            raise exc.ConnectionError(f"SSH handshake failed: {err}", self.host, self.port) from None
        except exc.Timeout:
            self.disconnect()
            raise

    def _verify_host_key(self) -> None:
        verify_host_key(self.session, self.host, self.port, self.host_key_policy, self.known_hosts)

    def _authenticate(self) -> None:
        failures = []
        for name, attempt in self._auth_methods():
            try:
                self.retry_eagain(attempt, what=f"authentication ({name})")
            except ssh2_exc.SSH2Error as err:
                failures.append(f"{name}: {err.message or type(err).__name__}")
                self.log.debug("authentication with %s failed: %s", name, err)
                continue
            if self.session.userauth_authenticated():
                self.log.debug("authenticated as %s with %s", self.user, name)
                return
        tried = "; ".join(failures) or "no authentication method available"
        raise exc.AuthenticationError(f"authentication as {self.user!r} failed ({tried})",
                                      self.host, self.port)

    def _auth_methods(self):
        session, user = self.session, self.user
        if self.pkey is not None:
            if isinstance(self.pkey, bytes):
                yield "key from memory", lambda: session.userauth_publickey_frommemory(
                    user, self.pkey, self.passphrase or "")
            else:
                path = os.path.expanduser(self.pkey)
                if not os.path.exists(path):
                    raise exc.PKeyFileError(f"private key file {path!r} not found",
                                            self.host, self.port)
                yield f"key {path}", lambda: session.userauth_publickey_fromfile(
                    user, path, self.passphrase or "")
        if self.allow_agent and os.environ.get("SSH_AUTH_SOCK"):
            yield from self._agent_methods()
        if self.identity_auth and self.pkey is None:
            for name in IDENTITY_FILES:
                path = os.path.expanduser(os.path.join("~", ".ssh", name))
                if os.path.exists(path):
                    yield f"key {path}", (lambda p=path: session.userauth_publickey_fromfile(
                        user, p, self.passphrase or ""))
        if self.password is not None:
            yield "password", lambda: session.userauth_password(user, self.password)
            if self.keyboard_interactive:
                yield "keyboard-interactive", lambda: session.userauth_keyboardinteractive(
                    user, self.password)

    def _agent_methods(self):
        try:
            agent = self.session.agent_init()
            agent.connect()
            identities = agent.get_identities()
        except ssh2_exc.SSH2Error as err:
            self.log.debug("SSH agent unavailable: %s", err)
            return
        for identity in identities:
            yield (f"agent key {identity.comment.decode(errors='replace')}",
                   lambda i=identity: agent.userauth(self.user, i))

    def disconnect(self) -> None:
        """Close the session and the socket (idempotent)."""
        self._sftp = None
        session, self.session = self.session, None
        if session is not None and self.sock is not None and self.sock.fileno() != -1:
            try:
                # Best effort goodbye, never blocking the hub.
                session.disconnect()
            except ssh2_exc.SSH2Error:
                pass
        del session
        if self.sock is not None:
            self.sock.close()

    # -- commands ----------------------------------------------------------------

    def _wrap(self, command: str, sudo: bool, user: Optional[str], shell: Optional[str]) -> str:
        if shell:
            command = f"{shell} -c {shlex.quote(command)}"
        if user:
            command = f"sudo -u {shlex.quote(user)} -S {command}" if shell else \
                f"sudo -u {shlex.quote(user)} -S sh -c {shlex.quote(command)}"
        elif sudo:
            command = f"sudo -S {command}" if shell else f"sudo -S sh -c {shlex.quote(command)}"
        return command

    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    use_pty: bool = False, shell: Optional[str] = None, encoding: str = "utf-8",
                    read_timeout: Optional[float] = None, errors: str = "replace",
                    timeout: Optional[float] = None) -> HostOutput:
        """Start ``command``; its output streams from the returned :class:`HostOutput`."""
        if self.session is None:
            raise exc.SessionError("client is disconnected", self.host, self.port)
        read_timeout = read_timeout if read_timeout is not None else timeout
        wrapped = self._wrap(command, sudo, user, shell)
        try:
            channel = self.retry_eagain(self.session.open_session, what="opening a channel")
            if use_pty:
                self.retry_eagain(channel.pty, what="requesting a pty")
            self.retry_eagain(channel.execute, wrapped, what="starting the command")
        except ssh2_exc.SSH2Error as err:
            raise exc.SessionError(f"cannot run command: {err}", self.host, self.port) from None
        self.log.debug("started %r", wrapped)
        return HostOutput(self.host, ChannelReader(self, channel), client=self, alias=self.alias,
                          encoding=encoding, errors=errors, read_timeout=read_timeout)

    def wait_finished(self, host_output: HostOutput, timeout: Optional[float] = None) -> None:
        """Wait for the command to end, buffering its output for later reading."""
        if host_output._reader is not None:
            host_output._reader.wait_eof(timeout)

    def get_exit_status(self, channel) -> Optional[int]:
        return channel.get_exit_status()

    def read_output(self, host_output: HostOutput):
        return host_output.stdout

    def read_stderr(self, host_output: HostOutput):
        return host_output.stderr

    def __del__(self):
        if getattr(self, "sock", None) is not None:
            self.sock.close()
