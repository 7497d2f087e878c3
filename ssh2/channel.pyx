# cython: language_level=3
"""``Channel``: a command, shell, subsystem or forwarded connection."""
cimport cython
from cpython.object cimport PyObject

from ssh2.c cimport libssh2 as c
from ssh2.session cimport (Session, CHILD_CHANNEL, MODULE_CHANNEL, lock, unlock,
                           register_child)
from ssh2.utils cimport to_bytes
from ssh2._bytes cimport bytes_alloc, bytes_data, bytes_take

from ssh2 import exceptions as _exc

LIBSSH2_CHANNEL_EXTENDED_DATA_NORMAL = c.LIBSSH2_CHANNEL_EXTENDED_DATA_NORMAL
LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE = c.LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE
LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE = c.LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE
LIBSSH2_CHANNEL_FLUSH_EXTENDED_DATA = c.LIBSSH2_CHANNEL_FLUSH_EXTENDED_DATA
LIBSSH2_CHANNEL_FLUSH_ALL = c.LIBSSH2_CHANNEL_FLUSH_ALL
LIBSSH2_CHANNEL_WINDOW_DEFAULT = c.LIBSSH2_CHANNEL_WINDOW_DEFAULT
LIBSSH2_CHANNEL_PACKET_DEFAULT = c.LIBSSH2_CHANNEL_PACKET_DEFAULT

# Large enough that bulk output needs few calls, small enough for short polls.
cdef enum:
    READ_SIZE = 65536

# Whether an exit status arrived: only our patched libssh2 can say (-1: cannot tell).
cdef extern from *:
    """
    #ifndef PSSH2_PATCHED_LIBSSH2
    #define PSSH2_PATCHED_LIBSSH2 0
    #endif
    #if PSSH2_PATCHED_LIBSSH2
    #define pssh2_exit_status_received(channel) libssh2_channel_exit_status_received(channel)
    #else
    #define pssh2_exit_status_received(channel) (-1)
    #endif
    """
    int pssh2_exit_status_received(c.LIBSSH2_CHANNEL *channel) nogil


cdef Channel PyChannel(c.LIBSSH2_CHANNEL *channel, Session session, object owner=None):
    """A Channel object for ``channel``; with ``owner``, the channel belongs to that
    object (e.g. the SFTP session's own channel): kept alive by it, never freed here."""
    cdef Channel obj = Channel.__new__(Channel)
    if owner is None:
        obj._adopt(channel, session, session, CHILD_CHANNEL)
    else:
        obj._adopt(channel, session, owner, 0)
    return obj


cdef object _new_channel(void *raw, Session session, object parent, object extra):
    return PyChannel(<c.LIBSSH2_CHANNEL *>raw, session, parent)


register_child(MODULE_CHANNEL, _new_channel)


@cython.no_gc_clear
cdef class Channel(SessionChild):
    """An SSH channel; obtained from ``Session.open_session()`` and friends.

    Keeps its session alive. Reads return ``(size, data)``: ``size`` is the
    number of bytes read, 0 at end of stream, or ``LIBSSH2_ERROR_EAGAIN`` in
    non-blocking mode.
    """

    _CLOSED = (_exc.ChannelClosedError, "the channel is closed")

    def __init__(self):
        raise TypeError("channels come from Session.open_session() and similar calls")

    cdef c.LIBSSH2_CHANNEL *_ptr(self) except NULL:
        return <c.LIBSSH2_CHANNEL *>self._live()

    cdef int _call(self, int rc, str context) except -1:
        return self.session._rc(rc, context)

    cdef int _simple(self, int (*fn)(c.LIBSSH2_CHANNEL *) noexcept nogil,
                     str context) except -1:
        """Run a one-argument libssh2 channel call under the session lock."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = fn(ch)
            unlock(self.session._lock)
        return self._call(rc, context)

    # -- requests ------------------------------------------------------------------

    def process_startup(self, request, message=None):
        """Send a channel request such as "exec", "shell" or "subsystem"."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef bytes b_req = to_bytes(request)
        cdef bytes b_msg = to_bytes(message) if message is not None else b""
        cdef const char *c_req = b_req
        cdef const char *c_msg = b_msg
        cdef unsigned int n_req = len(b_req), n_msg = len(b_msg)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_process_startup(ch, c_req, n_req,
                                                   c_msg if n_msg else NULL, n_msg)
            unlock(self.session._lock)
        return self._call(rc, f"channel request {request!r} failed")

    def execute(self, command):
        """Run ``command`` on the server. Returns 0 or EAGAIN."""
        # An exec request without a command makes sshd drop the connection.
        return self.process_startup("exec", to_bytes(command))

    def shell(self):
        """Start the user's login shell."""
        return self.process_startup("shell")

    def subsystem(self, subsystem):
        """Start a subsystem such as "sftp"."""
        return self.process_startup("subsystem", to_bytes(subsystem))

    def pty(self, term="vt100", int width=80, int height=24):
        """Request a pseudo-terminal."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef bytes b_term = to_bytes(term)
        cdef const char *c_term = b_term
        cdef unsigned int n_term = len(b_term)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_request_pty_ex(ch, c_term, n_term, NULL, 0,
                                                  width, height, 0, 0)
            unlock(self.session._lock)
        return self._call(rc, "pseudo-terminal request failed")

    def pty_size(self, int width, int height):
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_request_pty_size_ex(ch, width, height, 0, 0)
            unlock(self.session._lock)
        return self._call(rc, "pseudo-terminal resize failed")

    def setenv(self, varname, value):
        """Set an environment variable for the command (the server must AcceptEnv it)."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef bytes b_name = to_bytes(varname)
        cdef bytes b_value = to_bytes(value)
        cdef const char *c_name = b_name
        cdef const char *c_value = b_value
        cdef unsigned int n_name = len(b_name), n_value = len(b_value)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_setenv_ex(ch, c_name, n_name, c_value, n_value)
            unlock(self.session._lock)
        return self._call(rc, f"setting environment variable {varname!r} was refused")

    def request_auth_agent(self):
        """Ask the server to forward the SSH agent over this channel."""
        return self._simple(c.libssh2_channel_request_auth_agent,
                            "agent forwarding request failed")

    def x11_req(self, int screen_number):
        """Ask for X11 forwarding on this channel (a random cookie, many connections)."""
        return self.x11_req_ex(0, None, None, screen_number)

    def x11_req_ex(self, int single_connection, auth_proto, auth_cookie, int screen_number):
        """Ask for X11 forwarding: ``auth_proto`` and ``auth_cookie`` None pick
        MIT-MAGIC-COOKIE-1 and a random cookie."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef bytes b_proto = to_bytes(auth_proto) if auth_proto is not None else None
        cdef bytes b_cookie = to_bytes(auth_cookie) if auth_cookie is not None else None
        cdef const char *c_proto = NULL if b_proto is None else <const char *>b_proto
        cdef const char *c_cookie = NULL if b_cookie is None else <const char *>b_cookie
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_x11_req_ex(ch, single_connection, c_proto, c_cookie,
                                             screen_number)
            unlock(self.session._lock)
        return self._call(rc, "X11 forwarding request failed")

    def signal(self, signame):
        """Send a signal by name without "SIG" (e.g. "TERM") to the remote process."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef bytes b_sig = to_bytes(signame)
        cdef const char *c_sig = b_sig
        cdef size_t n_sig = len(b_sig)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_signal_ex(ch, c_sig, n_sig)
            unlock(self.session._lock)
        return self._call(rc, f"sending signal {signame!r} failed")

    # -- data ------------------------------------------------------------------------

    def read_ex(self, size_t size=READ_SIZE, int stream_id=0):
        """Read up to ``size`` bytes from ``stream_id`` (0 stdout, 1 stderr): ``(size, data)``."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef PyObject *raw
        cdef char *buf
        cdef Py_ssize_t rc
        if size == 0:
            raise ValueError("size must be > 0")
        raw = bytes_alloc(NULL, size)
        if raw is NULL:
            raise MemoryError()
        buf = bytes_data(raw)
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_read_ex(ch, stream_id, buf, size)
            unlock(self.session._lock)
        data = bytes_take(raw, rc, size)
        if rc < 0 and rc != c.LIBSSH2_ERROR_EAGAIN:
            self.session._raise(rc, "reading from the channel failed")
        return rc, data

    def read(self, size_t size=READ_SIZE):
        """Read stdout: ``(size, data)``."""
        return self.read_ex(size, 0)

    def read_stderr(self, size_t size=READ_SIZE):
        """Read stderr: ``(size, data)``."""
        return self.read_ex(size, c.SSH_EXTENDED_DATA_STDERR)

    def poll_channel_read(self, int extended):
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_poll_channel_read(ch, extended)
            unlock(self.session._lock)
        return rc

    def write_ex(self, int stream_id, buf):
        """Write ``buf`` to ``stream_id``: ``(rc, bytes_written)``.

        Blocking mode writes everything. Non-blocking mode writes what the
        window allows and returns ``(LIBSSH2_ERROR_EAGAIN, n)`` when it had to
        stop: write ``buf[n:]`` again later.
        """
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef bytes data = to_bytes(buf)
        cdef const char *c_buf = data
        cdef size_t remaining = len(data)
        cdef size_t total = 0
        cdef Py_ssize_t rc = 0
        with nogil:
            while remaining > 0:
                lock(self.session._lock)
                rc = c.libssh2_channel_write_ex(ch, stream_id, c_buf + total, remaining)
                unlock(self.session._lock)
                if rc < 0:
                    break
                total += rc
                remaining -= rc
        if rc < 0 and rc != c.LIBSSH2_ERROR_EAGAIN:
            self.session._raise(rc, "writing to the channel failed")
        return rc, total

    def write(self, buf):
        """Write to stdin: ``(rc, bytes_written)``."""
        return self.write_ex(0, buf)

    def write_stderr(self, buf):
        return self.write_ex(c.SSH_EXTENDED_DATA_STDERR, buf)

    def flush_ex(self, int stream_id):
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_flush_ex(ch, stream_id)
            unlock(self.session._lock)
        return self._call(rc, "flushing the channel failed")

    def flush(self):
        return self.flush_ex(0)

    def flush_stderr(self):
        return self.flush_ex(c.SSH_EXTENDED_DATA_STDERR)

    def handle_extended_data2(self, int ignore_mode):
        """How stderr is handled: ``LIBSSH2_CHANNEL_EXTENDED_DATA_NORMAL/IGNORE/MERGE``."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_handle_extended_data2(ch, ignore_mode)
            unlock(self.session._lock)
        return self._call(rc, "setting extended data mode failed")

    def ignore_extended_data(self, int ignore_mode):
        return self.handle_extended_data2(ignore_mode)

    # -- windows ----------------------------------------------------------------------

    def window_read_ex(self, unsigned long read_avail=0, unsigned long window_size_initial=0):
        """The receive window's size (libssh2 fills the two arguments in; as in
        ssh2-python they are accepted and only the window is returned)."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef unsigned long window
        with nogil:
            lock(self.session._lock)
            window = c.libssh2_channel_window_read_ex(ch, &read_avail, &window_size_initial)
            unlock(self.session._lock)
        return window

    def window_read(self):
        return self.window_read_ex()

    def window_write_ex(self, unsigned long window_size_initial=0):
        """The send window's size (the argument as for :meth:`window_read_ex`)."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef unsigned long window
        with nogil:
            lock(self.session._lock)
            window = c.libssh2_channel_window_write_ex(ch, &window_size_initial)
            unlock(self.session._lock)
        return window

    def window_write(self):
        return self.window_write_ex()

    def receive_window_adjust(self, unsigned long adjustment, bint force=False):
        """Grow the receive window; returns the new window size (or EAGAIN)."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef unsigned int window = 0
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_receive_window_adjust2(ch, adjustment, force, &window)
            unlock(self.session._lock)
        self._call(rc, "adjusting the receive window failed")
        return rc if rc == c.LIBSSH2_ERROR_EAGAIN else window

    def receive_window_adjust2(self, unsigned long adjustment, bint force=False):
        return self.receive_window_adjust(adjustment, force)

    # -- end of stream, exit status ----------------------------------------------------

    def eof(self):
        """Whether the server has sent EOF."""
        return bool(self._simple(c.libssh2_channel_eof, "checking EOF failed"))

    def send_eof(self):
        """Tell the server no more data will be written (closes remote stdin)."""
        return self._simple(c.libssh2_channel_send_eof, "sending EOF failed")

    def wait_eof(self):
        return self._simple(c.libssh2_channel_wait_eof, "waiting for EOF failed")

    def close(self):
        """Close the channel: sends EOF and a close, and (like libssh2) waits for the
        server's close. Returns 0 once done, or EAGAIN in non-blocking mode."""
        cdef int rc = self._simple(c.libssh2_channel_close, "closing the channel failed")
        if rc == 0:
            self._close_done = True
        return rc

    def wait_closed(self):
        """Wait for the server to close the channel; then the exit status is known.

        After :meth:`close` has completed this returns 0 at once: libssh2's
        close already waited for the server's close (libssh2 itself would
        refuse when that close came before the server's EOF).
        """
        if self._close_done:
            self._ptr()
            return 0
        return self._simple(c.libssh2_channel_wait_closed, "waiting for the channel to close failed")

    def get_exit_status(self):
        """The command's exit status (0 until the server has sent it)."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        return c.libssh2_channel_get_exit_status(ch)

    def exit_status_received(self):
        """Whether the server has sent the command's exit status, which
        :meth:`get_exit_status` gives as 0 until it has: True or False; None where this
        libssh2 cannot tell (a system libssh2, without build_support/patches)."""
        cdef int received = pssh2_exit_status_received(self._ptr())
        return None if received < 0 else bool(received)

    def get_exit_signal(self):
        """``(rc, signal, errmsg, langtag)``; ``signal`` is e.g. b'TERM' or None."""
        cdef c.LIBSSH2_CHANNEL *ch = self._ptr()
        cdef char *sig = NULL
        cdef char *msg = NULL
        cdef char *lang = NULL
        cdef size_t n_sig = 0, n_msg = 0, n_lang = 0
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_get_exit_signal(ch, &sig, &n_sig, &msg, &n_msg,
                                                   &lang, &n_lang)
            unlock(self.session._lock)
        self._call(rc, "reading the exit signal failed")
        try:
            return (rc, sig[:n_sig] if sig is not NULL else None,
                    msg[:n_msg] if msg is not NULL else None,
                    lang[:n_lang] if lang is not NULL else None)
        finally:
            for p in (<size_t>sig, <size_t>msg, <size_t>lang):
                if p:
                    c.libssh2_free(self.session._session, <void *>p)
