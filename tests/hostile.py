"""A hostile SSH server for the tests: a compromised host, written with asyncssh's server API.

It serves an SFTP tree the test defines (names, modes, sizes the server chooses,
``../`` names included, symlinks anywhere), answers ``scp -f`` with the bytes the
test writes (a ``C6777`` mode, an error after padding), and can stop answering SFTP
requests while the connection itself stays alive (keepalives answered). Uploads land
in the tree, in memory: nothing a client asks for touches this machine's files. It
runs on its own event loop in a thread, on a loopback address, until the ``with``
block ends.

Test-only: asyncssh is a test dependency, never one of the package's.
"""
from __future__ import annotations

import asyncio
import stat
import threading
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Dict, List, Optional

from extras import imported

asyncssh = imported("asyncssh")


@dataclass
class File:
    data: bytes = b""
    mode: int = 0o644


@dataclass
class Dir:
    """A directory listing ``names`` (as the server sends them: any bytes at all)."""

    names: List[bytes] = field(default_factory=list)
    mode: int = 0o755


@dataclass
class Link:
    """A symlink to ``target`` (an absolute path of the tree): ``lstat`` says so, every
    other request follows it, as a real server's file system would."""

    target: str


#: Links followed in one path at the most (Linux's limit): a loop ends in "no such file".
MAX_LINKS = 40


def attrs_of(node) -> asyncssh.SFTPAttrs:
    if isinstance(node, Link):
        return asyncssh.SFTPAttrs(permissions=stat.S_IFLNK | 0o777, size=len(node.target),
                                  uid=0, gid=0, atime=0, mtime=0)
    if isinstance(node, Dir):
        return asyncssh.SFTPAttrs(permissions=stat.S_IFDIR | node.mode, size=4096, uid=0,
                                  gid=0, atime=0, mtime=0)
    return asyncssh.SFTPAttrs(permissions=stat.S_IFREG | node.mode, size=len(node.data),
                              uid=0, gid=0, atime=0, mtime=0)


#: ``scp(process)``: answers one ``scp -f``/``scp -t`` command (bytes in, bytes out).
SCPHandler = Callable[[asyncssh.SSHServerProcess], Awaitable[None]]


class HostileServer:
    """An SSH server on ``address`` whose SFTP tree is ``tree`` (path as the client asks for
    it -> :class:`File` or :class:`Dir`); any key or password logs in. ``scp``: the
    handler of ``scp`` commands, ``command`` of any other command. ``stall_sftp``: SFTP
    requests are never answered."""

    def __init__(self, address: str, tree: Optional[Dict[str, object]] = None,
                 scp: Optional[SCPHandler] = None, stall_sftp: bool = False,
                 command: Optional[SCPHandler] = None) -> None:
        self.address = address
        self.port = 0
        self.tree = dict(tree or {})
        self.scp = scp
        self.command = command
        self.stall_sftp = stall_sftp
        #: The paths clients asked about, in order (stat, open, opendir).
        self.asked: List[str] = []
        #: The paths clients wrote (created, renamed to, chmod'ed), as the file system
        #: would: each with the links in it followed.
        self.written: List[str] = []
        self.commands: List[str] = []
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server = None

    # -- for the test ------------------------------------------------------------------------

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key().decode().split()[:2]
        return f"[{self.address}]:{self.port} {' '.join(key)}\n"

    def __enter__(self) -> "HostileServer":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc_info) -> None:
        async def stop():
            self._server.close()
            await self._server.wait_closed()
            # Requests it never answered (stall_sftp) end with it.
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- the server --------------------------------------------------------------------------

    def resolve(self, path: str, follow: bool = True) -> str:
        """``path`` with the links of the tree in it followed (the last one only if
        ``follow``), as a file system resolves it."""
        parts = [p for p in path.split("/") if p]
        done: List[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            here = "/" + "/".join(done + [part])
            node = self.tree.get(here)
            if isinstance(node, Link) and (parts or follow) and hops < MAX_LINKS:
                hops += 1
                parts = [p for p in node.target.split("/") if p] + parts
                done = []
                continue
            done.append(part)
        return "/" + "/".join(done)

    async def _stall(self, request: str) -> None:
        if self.stall_sftp is not True and request in (self.stall_sftp or ()):
            await asyncio.Future()   # never answered

    async def _start(self) -> None:
        outer = self

        class Server(asyncssh.SSHServer):
            def begin_auth(self, username):
                return True

            def public_key_auth_supported(self):
                return True

            def validate_public_key(self, username, key):
                return True

            def password_auth_supported(self):
                return True

            def validate_password(self, username, password):
                return True

        class SFTP(asyncssh.SFTPServer):
            async def _node(self, path: bytes, follow: bool = True):
                text = path.decode("utf-8", "surrogateescape")
                outer.asked.append(text)
                if outer.stall_sftp is True:
                    await asyncio.Future()   # never answered
                node = outer.tree.get(outer.resolve(text, follow))
                if node is None:
                    raise asyncssh.SFTPNoSuchFile(f"{text}: no such file")
                return node

            async def stat(self, path):
                return attrs_of(await self._node(path))

            async def lstat(self, path):
                return attrs_of(await self._node(path, follow=False))

            async def scandir(self, path):
                node = await self._node(path)
                text = path.decode("utf-8", "surrogateescape").rstrip("/")
                for name in [b".", b"..", *node.names]:
                    child = outer.tree.get(outer.resolve(
                        text + "/" + name.decode("utf-8", "surrogateescape"), False), File())
                    yield asyncssh.SFTPName(name, b"", attrs_of(child if name not in
                                                                 (b".", b"..") else Dir()))

            def _write(self, path: bytes) -> str:
                text = path.decode("utf-8", "surrogateescape")
                outer.asked.append(text)
                real = outer.resolve(text)
                outer.written.append(real)
                return real

            async def mkdir(self, path, attrs):
                real = self._write(path)
                if real in outer.tree:
                    raise asyncssh.SFTPFailure(f"{real}: exists")
                outer.tree[real] = Dir(mode=(attrs.permissions or 0o755) & 0o7777)

            async def setstat(self, path, attrs):
                node = outer.tree.get(self._write(path))
                if node is None:
                    raise asyncssh.SFTPNoSuchFile("no such file")
                if attrs.permissions is not None:
                    node.mode = attrs.permissions & 0o7777

            async def posix_rename(self, oldpath, newpath):
                # As rename(2): the new name itself is replaced, a link there included.
                old = outer.resolve(oldpath.decode("utf-8", "surrogateescape"))
                text = newpath.decode("utf-8", "surrogateescape")
                new = outer.resolve(text, follow=False)
                outer.asked.append(text)
                outer.written.append(new)
                outer.tree[new] = outer.tree.pop(old)

            rename = posix_rename

            async def remove(self, path):
                outer.tree.pop(outer.resolve(path.decode("utf-8", "surrogateescape"), False),
                               None)

            async def open(self, path, pflags, attrs):
                if pflags & asyncssh.FXF_CREAT:   # an upload: accepted, kept in memory
                    real = self._write(path)
                    outer.tree.setdefault(real, File(mode=(attrs.permissions or 0o644)
                                                     & 0o7777))
                node = await self._node(path)
                if isinstance(node, Dir):
                    raise asyncssh.SFTPFailure("a directory")
                return node

            async def fstat(self, file_obj):
                return attrs_of(file_obj)

            async def read(self, file_obj, offset, size):
                await outer._stall("read")
                return file_obj.data[offset:offset + size]

            async def write(self, file_obj, offset, data):
                await outer._stall("write")
                file_obj.data = file_obj.data[:offset] + data
                return len(data)

            async def close(self, file_obj):
                await outer._stall("close")

            async def realpath(self, path):
                return path

        async def process(proc: asyncssh.SSHServerProcess) -> None:
            outer.commands.append(proc.command or "")
            if proc.command and proc.command.startswith("scp ") and outer.scp is not None:
                await outer.scp(proc)
            elif outer.command is not None:
                await outer.command(proc)
            else:
                proc.exit(127)

        self._server = await asyncssh.listen(
            self.address, 0, server_host_keys=[self.host_key], server_factory=Server,
            sftp_factory=SFTP, process_factory=process, encoding=None, allow_scp=False,
            keepalive_interval=0)
        self.port = self._server.sockets[0].getsockname()[1]


def scp_source(header: bytes, data: bytes, trailer: bytes = b"\0", exit_status: int = 0,
               stall: bool = False) -> SCPHandler:
    """An ``scp -f`` that sends ``header`` (``C<mode> <size> <name>``), ``data`` and
    ``trailer`` (``\\0``: complete; ``\\1...``: an error), then exits ``exit_status``.
    ``stall``: after ``data`` it sends nothing more and never exits (the connection stays
    up and answers keepalives)."""
    async def serve(proc: asyncssh.SSHServerProcess) -> None:
        await proc.stdin.readexactly(1)                   # the sink is ready
        if " -pf " in f" {proc.command} " or proc.command.startswith("scp -pf"):
            proc.stdout.write(b"T0 0 0 0\n")
            await proc.stdin.readexactly(1)
        proc.stdout.write(header.rstrip(b"\n") + b"\n")
        await proc.stdin.readexactly(1)
        if stall:
            proc.stdout.write(data)
            await asyncio.Event().wait()
        proc.stdout.write(data + trailer)
        try:
            await asyncio.wait_for(proc.stdin.readexactly(1), 5)
        except (asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        proc.exit(exit_status)
    return serve


__all__ = ["Dir", "File", "HostileServer", "Link", "scp_source"]
