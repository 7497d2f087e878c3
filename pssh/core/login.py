"""The login sequence without the waiting: what both front ends do to get a session in.

A front end (gevent's :class:`~pssh.clients.native.single.SSHClient`, asyncio's
:class:`~pssh.aio.connection.SSHClientConnection`) creates the session and the
socket, then uses these pieces and differs only in how it waits:

- :func:`prepare_session` sets up a new session before its handshake (flags,
  algorithm preferences, host certificates);
- the ``*_attempts`` functions say which libssh2 login calls to make, in order,
  as :class:`Attempt`s; the front end drives each one non-blocking through its
  session driver and stops at the first that :func:`accepted`;
- :func:`key_errors` turns libssh2's one message for every key problem into a
  clear one (an encrypted key without its passphrase, a wrong passphrase).
"""
from __future__ import annotations

import fnmatch
import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, List, NamedTuple, Optional, Sequence, Type

from pssh.core import errors as exc
from pssh.core.keys import KeyInfo, read_key_file
from pssh.core.known_hosts import set_host_key_preference
from pssh.core.settings import Resolved
from ssh2 import exceptions as ssh2_exc
from ssh2.session import (LIBSSH2_FLAG_COMPRESS, LIBSSH2_FLAG_EARLY_USERAUTH,
                          LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, LIBSSH2_METHOD_CRYPT_CS,
                          LIBSSH2_METHOD_CRYPT_SC, LIBSSH2_METHOD_KEX, LIBSSH2_METHOD_MAC_CS,
                          LIBSSH2_METHOD_MAC_SC, PATCHED_LIBSSH2)

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.agent import Agent
    from ssh2.session import FlagType, MethodType, Session

log = logging.getLogger(__name__)


class Attempt(NamedTuple):
    """One libssh2 login call: ``call(*args)``, driven until it stops asking to wait."""

    call: Callable
    args: tuple
    what: str  # for logs and errors: "key /home/u/.ssh/id_ed25519", "password", ...
    #: It hands the server a secret (a password, keyboard-interactive answers): never
    #: made to a host whose key did not verify (:func:`pssh.core.known_hosts.verify_host_key`).
    sends_secret: bool = False


def set_patched_flag(session: Session, flag: FlagType, enabled: bool = True) -> None:
    """Set a session flag that only our libssh2 patches have; without them, nothing to do."""
    if PATCHED_LIBSSH2:
        session.flag(flag, enabled)


# -- before the handshake ------------------------------------------------------------------

#: ConnectOptions field -> the libssh2 method types it sets (both directions where two).
_ALGORITHM_FIELDS = (
    ("ciphers", "Ciphers", (LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC)),
    ("macs", "MACs", (LIBSSH2_METHOD_MAC_CS, LIBSSH2_METHOD_MAC_SC)),
    ("kex_algorithms", "KexAlgorithms", (LIBSSH2_METHOD_KEX,)),
)


#: Not algorithms but flags in the key exchange list (extension negotiation, strict key
#: exchange against the Terrapin attack): kept whatever list the user gives.
_KEX_MARKERS = ("ext-info-c", "kex-strict-c-v00@openssh.com")


def prepare_session(session: Session, resolved: Resolved, host: str) -> None:
    """Set up the new non-blocking ``session`` for ``resolved``'s host before its handshake.

    The first login request follows the handshake without waiting for the
    server's service answer (a round trip less, our libssh2 patch); compression
    and algorithm lists as the options say; host key algorithms ordered by what
    known_hosts holds for the host (:func:`~pssh.core.known_hosts.host_key_algorithms`).
    """
    options = resolved.options
    if options.compress:
        session.flag(LIBSSH2_FLAG_COMPRESS)
    set_patched_flag(session, LIBSSH2_FLAG_EARLY_USERAUTH)
    for name, keyword, methods in _ALGORITHM_FIELDS:
        spec = getattr(options, name)
        if spec:
            supported = session.supported_algs(methods[0])
            prefs = algorithm_list(spec, supported, default_order(session, methods[0]))
            prefs += [marker for marker in _KEX_MARKERS if marker in supported
                      and marker not in prefs and prefs]
            if not prefs:
                raise exc.ConnectionError.at(
                    host, resolved.port, f"{keyword} {spec!r}: none of these is supported "
                    f"by this libssh2 (it has: {', '.join(supported)})")
            for method in methods:
                session.method_pref(method, ",".join(prefs))
    set_host_key_preference(session, resolved.host_key_name, resolved.port,
                            options.known_hosts)


def default_order(session: Session, method: MethodType) -> List[str]:
    """The preference libssh2 uses when none is set (for ciphers: ours, fastest first)."""
    supported = list(session.supported_algs(method))
    if method in (LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC):
        from ssh2 import cipher_prefs
        return cipher_prefs.default_order(supported).split(",")
    return supported


def algorithm_list(spec: str, supported: Sequence[str], default: List[str]) -> List[str]:
    """An OpenSSH algorithm list (``Ciphers``, ``MACs``, ``KexAlgorithms`` syntax) as the
    supported names in order: ``a,b`` exactly these; ``+a,b`` the default and these;
    ``-a*,b`` the default without these (wildcards allowed); ``^a,b`` these first."""
    head, names = spec[:1], [n.strip() for n in spec.lstrip("+-^").split(",") if n.strip()]
    if head == "-":
        return [alg for alg in default
                if not any(fnmatch.fnmatchcase(alg, pattern) for pattern in names)]
    wanted = [name for name in names if name in supported]
    if head == "+":
        return default + [name for name in wanted if name not in default]
    if head == "^":
        return wanted + [name for name in default if name not in wanted]
    return wanted


# -- logging in ----------------------------------------------------------------------------

def accepted(session: Session) -> bool:
    """Whether the session is logged in (a method can succeed partially: the server then
    wants another one as well)."""
    return bool(session.userauth_authenticated())


def key_file_attempts(session: Session, user: str, key_file: str, passphrase: str,
                      cert_file: Optional[str] = None) -> List[Attempt]:
    """A key file's logins: its certificate first (``cert_file``, else ``<key>-cert.pub``
    when present), then the key itself, with its ``.pub`` when present (libssh2 then need
    not derive the public key from the private one).

    The files are read once while they stay as they are (:func:`~pssh.core.keys.
    read_key_file`) and handed to libssh2 from memory: a fan-out does not open them
    again for every host. Key files sign at once, without first asking whether the
    server would take the key (a round trip less, our libssh2 patch).
    """
    set_patched_flag(session, LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, True)
    key = read_key_file(key_file)
    attempts = []
    if cert_file is not None:
        try:
            with open(cert_file, "rb") as fh:
                certificate: Optional[bytes] = fh.read()
        except FileNotFoundError:
            raise exc.PKeyFileError("certificate file %s does not exist", cert_file) from None
        cert_name = cert_file
    else:
        certificate, cert_name = key.certificate, key_file + "-cert.pub"
    if certificate is not None:
        name = f"certificate {cert_name}"
        attempts.append(Attempt(_named_login(session, name),
                                (user, key.data, passphrase, certificate), name))
    name = f"key {key_file}"
    attempts.append(Attempt(_named_login(session, name), (user, key.data, passphrase,
                                                          key.public), name))
    return attempts


def _named_login(session: Session, name: str) -> Callable:
    """``session.userauth_publickey_frommemory``, whose failure names ``name`` (the file
    the key came from: the bindings' message can only say "key from memory")."""
    def login(user: str, key: bytes, passphrase: str, public: Optional[bytes]) -> object:
        try:
            return session.userauth_publickey_frommemory(user, key, passphrase, public)
        except ssh2_exc.SSH2Error as err:
            err.message = f"{err.message} ({name})"
            err.args = (err.message,) + err.args[1:]
            raise
    return login


def key_data_attempt(session: Session, user: str, key_data: bytes, passphrase: str) -> Attempt:
    """The login with a private key given in memory (signed at once, as key files are)."""
    set_patched_flag(session, LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, True)
    return Attempt(session.userauth_publickey_frommemory, (user, key_data, passphrase),
                   "key from memory")


def agent_attempts(session: Session, agent: Agent, user: str) -> Iterator[Attempt]:
    """A login with each key of the connected ``agent``. These ask the server first
    whether it takes the key: an agent may prompt its user before signing."""
    set_patched_flag(session, LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, False)
    for identity in agent.get_identities():
        yield Attempt(agent.userauth, (user, identity),
                      f"agent key {identity.comment.decode(errors='replace')}")


def password_attempt(session: Session, user: str, password: str,
                     keyboard_interactive: bool = False) -> Attempt:
    """The password login (as keyboard-interactive's one answer when asked)."""
    if keyboard_interactive:
        return Attempt(session.userauth_keyboardinteractive, (user, password),
                       "keyboard-interactive", sends_secret=True)
    return Attempt(session.userauth_password, (user, password), "password", sends_secret=True)


@contextmanager
def key_errors(info: KeyInfo, name: str, passphrase: Optional[str],
               error: Type[Exception] = exc.PKeyFileError) -> Iterator[None]:
    """Say plainly when an encrypted key lacks its passphrase or got a wrong one."""
    if info.encrypted and not passphrase:
        raise error("%s is encrypted: give its passphrase (passphrase=)" % name)
    try:
        yield
    except (ssh2_exc.PublickeyUnverifiedError, ssh2_exc.FileError) as err:
        # libssh2 could not decrypt the key to sign (or to read its public half).
        if not info.encrypted:
            raise
        raise error("%s: wrong passphrase (libssh2: %s)"
                    % (name, err.message or err)) from err


def disconnect_agent(agent: Agent) -> None:
    """Let go of the agent connection (a failure to is of no consequence)."""
    try:
        agent.disconnect()
    except ssh2_exc.SSH2Error:
        pass
