# cython: language_level=3
"""The native runner's engine: one epoll set driving many core procedures.

Every procedure of :mod:`pssh.core` says what it waits for
(:mod:`pssh.core.waits`). The gevent and asyncio runners turn each such request
into a wait of their loop: a watcher object, a timeout object and two greenlet
switches (or a future and a task step) per request, for each of many hosts.
This engine answers the requests itself, for all procedures of a thread at
once: one epoll set whose registrations stay while waits keep coming (each
``epoll_ctl`` is a system call), one heap of deadlines, one queue of
procedures ready to step. A procedure's wait costs an entry in a set and in
the heap, never an object of an event loop, never a switch.

What it cannot do without blocking (resolving a name, a connect made through
an application's own function) it hands to its host (:class:`Engine`'s
``delegate``), which answers later through :meth:`Engine.answer`.

:mod:`pssh.runners.native` hosts an engine on gevent's hub (one greenlet per
thread drives it) or runs one on its own in the calling thread.
"""
from cpython.ref cimport PyObject
from libc.errno cimport errno, EINTR, ENOENT, EEXIST, EINPROGRESS, ECONNREFUSED
from libc.stdint cimport uint32_t, uint64_t

import heapq
import os
import socket as _socket
import weakref
from collections import deque

from pssh.core import clock as _clock
from pssh.core.link import Link as _Link
from pssh.core.waits import (Blocking, Connect, Resolve, SessionIO, Sleep, SocketIO, Spawn,
                             Task, WaitFor)
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND

cdef extern from "sys/epoll.h" nogil:
    ctypedef union epoll_data_t:
        int fd
        uint64_t u64
    struct epoll_event:
        uint32_t events
        epoll_data_t data
    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event *event)
    int epoll_wait(int epfd, epoll_event *events, int maxevents, int timeout)
    enum:
        EPOLLIN
        EPOLLOUT
        EPOLLERR
        EPOLLHUP
        EPOLL_CTL_ADD
        EPOLL_CTL_MOD
        EPOLL_CTL_DEL
        EPOLL_CLOEXEC

cdef extern from "unistd.h" nogil:
    int close(int fd)

#: Events taken from the kernel per epoll_wait.
DEF BATCH = 256

cdef class _Connecting    # below: a connect in progress

cdef uint32_t _READ = EPOLLIN
cdef uint32_t _WRITE = EPOLLOUT
cdef int _INBOUND = LIBSSH2_SESSION_BLOCK_INBOUND
cdef int _OUTBOUND = LIBSSH2_SESSION_BLOCK_OUTBOUND


class Cancelled(BaseException):
    """Thrown into a background procedure whose :class:`~pssh.core.waits.Task` was
    cancelled (as gevent's GreenletExit or asyncio's CancelledError is)."""


cdef class Run:
    """A procedure being driven: its generator, what it waits on, how it ended.

    ``token`` names its current wait (0: not waiting): a wake-up that carries an
    older token (a deadline already passed, a socket already answered) is stale
    and ignored, so nothing has to be taken out of the heap or a set at once.
    """
    cdef object send, throw
    cdef readonly object task
    cdef public object done      # called with (result, error) when it ends (main runs)
    cdef uint64_t token
    cdef int fd
    cdef uint32_t events
    cdef object waiters          # the set it is in (a socket's or a link's), or None
    cdef object link_waiters     # its link's wake set, or None
    cdef object unsubscribe      # undoes a WaitFor's subscription, or None
    cdef bint on_time            # the answer at its deadline (True: a sleep ended)
    cdef public bint ended
    cdef object delegate         # who answers Resolve and Connect (None: the engine's)
    cdef object seen             # Link.wakes when it was last queued (started, resumed)
    cdef bint fresh              # no SessionIO handled since then
    cdef object thrown           # its caller's error, for the wait after its queued step

    def __cinit__(self, procedure, task=None, done=None, delegate=None):
        self.send = procedure.send
        self.throw = procedure.throw
        self.task = task
        self.done = done
        self.delegate = delegate
        self.fd = -1
        self.seen = _Link.wakes
        self.fresh = True


cdef class Watch:
    """The runs waiting on one socket, what its epoll registration asks for, and whose
    it is (a weak reference to the socket object: a socket closed and a new one given
    its number must be registered afresh, which the kernel's set already forgot)."""
    cdef set runs
    cdef uint32_t registered
    cdef object owner

    def __cinit__(self):
        self.runs = set()


cdef class LinkWaiters:
    """A link's waiting runs (its waker for this runner, :meth:`pssh.core.link.Link.
    waker_for`): :meth:`pssh.core.link.Link.wake` sends
    them back to their calls, which may find their packets read by another's."""
    cdef Engine engine
    cdef set runs

    def __cinit__(self, Engine engine):
        self.engine = engine
        self.runs = set()

    def wake(self):
        cdef Run run
        if not self.runs:
            return
        for run in tuple(self.runs):
            self.engine._resume(run, run.token, True)
        if not self.engine.turning:
            # From a greenlet outside the engine's turn (a sharded worker's pump told of
            # new credit, a close): nothing else turns the engine for these runs, and a
            # silent server would leave them ready and unstepped for ever.
            self.engine._kick()

    def close(self):
        self.wake()


cdef class Engine:
    """Drives core procedures: :meth:`start` one, :meth:`turn` the loop.

    A connect is made here, non-blocking; an address needs no resolving. What would
    block the thread (resolving a name, a :class:`~pssh.core.waits.Blocking` call) goes
    to ``delegate(kind, request, answer)``, ``kind`` being "resolve", "connect" or
    "call"; it later calls ``answer(value, error)`` once, from the engine's thread, and
    may return a function that stops that work (called if the procedure stops waiting). A procedure started with a delegate of its own
    (an application's resolve and connect functions) has both answered by it.
    ``kick()`` is called when work arrives from outside a turn (an event set by
    another greenlet), so that a host waiting for the epoll set wakes up. ``adopt(sock)``
    gives a socket the engine connected the form its host's programs expect (gevent's
    socket objects, for parallel-ssh's ``client.sock.closed``).
    """
    cdef int epfd
    cdef object ready            # deque of (Run, value, error)
    cdef list timers             # heap of (deadline, seq, Run, token)
    cdef dict watches            # fd -> Watch
    cdef uint64_t tokens, seq
    cdef object delegate, kick, adopt
    cdef readonly int running
    cdef bint turning             # in turn(): what becomes ready is stepped in it
    cdef epoll_event events[BATCH]

    def __cinit__(self):
        self.epfd = epoll_create1(EPOLL_CLOEXEC)
        if self.epfd < 0:
            raise OSError(errno, os.strerror(errno))
        self.ready = deque()
        self.timers = []
        self.watches = {}

    def __init__(self, delegate=None, kick=None, adopt=None):
        self.delegate = delegate
        self.kick = kick
        self.adopt = adopt

    def __dealloc__(self):
        if self.epfd >= 0:
            close(self.epfd)

    def fileno(self):
        """The epoll set's descriptor: readable when a watched socket is ready."""
        return self.epfd

    # -- procedures ----------------------------------------------------------------------

    def start(self, procedure, done=None, task=None, delegate=None):
        """Drive ``procedure`` from the next turn on; ``done(result, error)`` when it ends.
        ``delegate``: this procedure's own (see the class's text; a Connect is then
        always delegated). Returns its :class:`Run`."""
        cdef Run run = Run(procedure, task, done, delegate)
        self.running += 1
        self.ready.append((run, None, None))
        return run

    def throw_in(self, Run run, error):
        """Deliver ``error`` into ``run`` at its current wait (its ``finally`` blocks run);
        nothing if it has ended."""
        if run.ended:
            return
        if run.token == 0:
            # Already queued to step (answered, not yet stepped): the error goes in at
            # the wait after that step, or ends the procedure if that step does (see
            # _step, _end). A second entry behind the answer came too late when the answer
            # ended the procedure: the caller's kill or Timeout was lost.
            run.thrown = error
            self._kick()
            return
        self._forget(run)
        self.ready.append((run, None, error))
        self._kick()

    def spawn(self, procedure, str name=""):
        """Start ``procedure`` in the background; its :class:`~pssh.core.waits.Task`."""
        task = Task(name)
        cdef Run run = self.start(procedure, None, task)
        task._cancel = lambda: self.throw_in(run, Cancelled(name))
        self._kick()
        return task

    def answer(self, Run run, uint64_t token, value, error=None):
        """The answer to a delegated request (see the class's text)."""
        if run.token != token or run.ended:
            return
        run.unsubscribe = None   # its work is done: nothing to stop
        self._forget(run)
        self.ready.append((run, value, error))
        self._kick()

    # -- the loop ------------------------------------------------------------------------

    def has_ready(self):
        return bool(self.ready)

    def next_timeout(self):
        """Seconds until the earliest deadline (None: none; 0: something is ready)."""
        if self.ready:
            return 0.0
        cdef list timers = self.timers
        cdef Run run
        while timers:
            run = timers[0][2]
            if run.token == timers[0][3]:
                return max(0.0, timers[0][0] - _clock.now())
            heapq.heappop(timers)   # a wait that was answered otherwise
        return None

    def turn(self, timeout=0.0):
        """Step every ready procedure, then take the sockets that are ready (waiting at
        most ``timeout`` seconds when nothing is ready; None: until one is) and the
        deadlines that had passed when the turn began, and step those. (A ``Sleep(0)``
        asked for during a turn, a procedure giving the loop a turn, is answered in the
        next one: after the host's loop has had its own.)"""
        began = _clock.now()
        cdef int ms
        self.turning = True
        try:
            self._step_ready()
            if self.ready:
                ms = 0
            elif timeout is None:
                ms = -1
            else:
                ms = <int>(timeout * 1000.0 + 0.999)
            self._poll(ms)
            self._expire(began if ms == 0 else _clock.now())
            self._step_ready()
        finally:
            self.turning = False

    cdef _step_ready(self):
        ready = self.ready
        while ready:
            run, value, error = ready.popleft()
            self._step(<Run>run, value, error)

    cdef _poll(self, int ms):
        cdef int n, i, fd
        cdef uint32_t happened, wanted
        cdef Watch watch
        cdef Run run
        with nogil:
            n = epoll_wait(self.epfd, self.events, BATCH, ms)
        if n < 0:
            if errno == EINTR:
                return
            raise OSError(errno, os.strerror(errno))
        for i in range(n):
            fd = self.events[i].data.fd
            happened = self.events[i].events
            watch = self.watches.get(fd)
            if watch is None:
                continue
            if happened & (EPOLLERR | EPOLLHUP):
                happened |= _READ | _WRITE   # the call that follows says what went wrong
            if not watch.runs:
                # Nobody waits any more: only now give the registration up (a transfer
                # waits again at once, thousands of times a second).
                self._unregister(fd, watch)
                continue
            wanted = 0
            for run in tuple(watch.runs):
                wanted |= run.events
                if run.events & happened:
                    self._resume(run, run.token, True)
            if happened & ~wanted & (_READ | _WRITE):
                # Ready in a direction nobody waits for now (writable, while they wait
                # to read): narrow the registration, or the set stays ready and the
                # host's loop turns for nothing.
                self._narrow(fd, watch, wanted)

    cdef _expire(self, now):
        cdef list timers = self.timers
        cdef Run run
        while timers and timers[0][0] <= now:
            _, _, run, token = heapq.heappop(timers)
            if run.token == token:
                self._resume(run, token, run.on_time)

    cdef _step(self, Run run, value, error):
        if run.ended:
            return
        try:
            if error is not None:
                request = run.throw(error)
            else:
                request = run.send(value)
        except StopIteration as stop:
            self._end(run, stop.value, None)
            return
        except BaseException as err:
            self._end(run, None, err)
            return
        if run.thrown is not None:
            # Its caller's kill or Timeout came while this step was queued: it goes in at
            # this wait, after the answer the step was queued with (a task, a socket: the
            # procedure has it, and its clean-up sees to it).
            thrown, run.thrown = run.thrown, None
            self.ready.append((run, None, thrown))
            return
        try:
            self._handle(run, request)
        except BaseException as err:  # into the procedure, which decides
            self.ready.append((run, None, err))

    cdef _end(self, Run run, result, error):
        if run.thrown is not None:
            # Ended by the answer its step was queued with: the caller's kill or Timeout
            # that came meanwhile still stands.
            if error is None:
                result, error = None, run.thrown
            run.thrown = None
        run.ended = True
        run.token = 0
        self.running -= 1
        if run.task is not None:
            if error is not None:
                run.task.finished(exception=error)
            else:
                run.task.finished(result)
        if run.done is not None:
            done, run.done = run.done, None
            done(result, error)

    # -- answering requests --------------------------------------------------------------

    cdef _handle(self, Run run, request):
        cdef type kind = type(request)
        cdef int directions
        cdef uint32_t events
        if kind is SessionIO:
            link = request.link
            if run.fresh:
                run.fresh = False
                if link.woken > run.seen:
                    # Woken since this run was queued (started, or resumed) and before it
                    # came to wait here: the wake may have been for this wait (its caller's
                    # state changed), so it ends at once. Only the first wait after each
                    # queueing: a procedure that wakes its link after each read (its own
                    # wake) must still park, so that the loop polls between its reads.
                    self.ready.append((run, True, None))
                    return
            # (Link.waker_for, inline: one engine per thread, so one of ours per link)
            waiters = link.wakers.get(LinkWaiters)
            if waiters is None:
                waiters = link.wakers[LinkWaiters] = LinkWaiters(self)
            directions = link.live_session.block_directions()
            events = ((_READ if directions & _INBOUND else 0)
                      | (_WRITE if directions & _OUTBOUND else 0)) or _READ
            self._park(run, request.deadline, False)
            self._watch(run, link.live_sock, events)
            run.link_waiters = (<LinkWaiters>waiters).runs
            run.link_waiters.add(run)
        elif kind is Sleep:
            self._park(run, _clock.now() + request.seconds, True)
        elif kind is SocketIO:
            self._park(run, request.deadline, False)
            self._watch(run, request.sock, _WRITE if request.write else _READ)
        elif kind is WaitFor:
            event = request.event
            if event.is_set():
                self.ready.append((run, True, None))
                return
            token = self._park(run, request.deadline, False)
            callback = lambda: self._resume_outside(run, token)
            event.subscribe(callback)
            run.unsubscribe = lambda: event.unsubscribe(callback)
        elif kind is Spawn:
            self.ready.append((run, self.spawn(request.procedure, request.name), None))
        elif kind is Connect and run.delegate is None:
            self._connect(run, request)
        elif kind is Resolve or kind is Connect or kind is Blocking:
            if kind is Resolve and run.delegate is None:
                numeric = _numeric(request)
                if numeric is not None:   # an address: no resolver to ask, no thread hop
                    self.ready.append((run, numeric, None))
                    return
            token = self._park(run, None, False)
            delegate = self.delegate if kind is Blocking or run.delegate is None \
                else run.delegate
            # What the delegate returns, if anything, stops its work when the procedure
            # stops waiting for it otherwise (an exception thrown in, a cancel).
            run.unsubscribe = delegate(
                "resolve" if kind is Resolve else "connect" if kind is Connect else "call",
                request, lambda value, error=None: self.answer(run, token, value, error))
        else:
            raise TypeError(f"not a wait request: {request!r}")

    cdef _connect(self, Run run, request):
        sock = _socket.socket(request.family, request.kind)
        sock.setblocking(False)
        try:
            code = sock.connect_ex(request.address)
        except BaseException:
            sock.close()
            raise
        if code == 0:
            self.ready.append((run, sock if self.adopt is None else self.adopt(sock), None))
            return
        if code != EINPROGRESS:
            sock.close()
            raise _connect_error(code)
        self._park(run, request.deadline, False)
        self._watch(run, sock, _WRITE)
        # Resumed with True (writable: connected, or failed) or at the deadline; the
        # procedure then gets the socket, None, or the error, as the request says.
        run.unsubscribe = _Connecting(sock)

    cdef uint64_t _park(self, Run run, deadline, bint on_time):
        self.tokens += 1
        run.token = self.tokens
        run.on_time = on_time
        if deadline is not None:
            self.seq += 1
            heapq.heappush(self.timers, (deadline, self.seq, run, run.token))
        return run.token

    cdef _watch(self, Run run, sock, uint32_t events):
        cdef int fd = sock.fileno()
        cdef Watch watch = self.watches.get(fd)
        cdef epoll_event ev
        cdef uint32_t wanted
        cdef Run other
        if watch is not None and watch.owner() is not sock:
            # Another socket had this number: its registration left with it.
            self._unregister(fd, watch)
            watch = None
        if watch is None:
            watch = self.watches[fd] = Watch()
            watch.owner = weakref.ref(sock)
        run.fd = fd
        run.events = events
        run.waiters = watch.runs
        watch.runs.add(run)
        wanted = events
        for other in watch.runs:
            wanted |= other.events
        if wanted | watch.registered == watch.registered:
            return
        wanted |= watch.registered
        ev.events = wanted
        ev.data.u64 = 0
        ev.data.fd = fd
        if epoll_ctl(self.epfd, EPOLL_CTL_MOD if watch.registered else EPOLL_CTL_ADD, fd,
                     &ev) < 0:
            # A socket closed and another given its number: the kernel dropped the old
            # registration by itself.
            if errno == ENOENT:
                if epoll_ctl(self.epfd, EPOLL_CTL_ADD, fd, &ev) < 0:
                    raise OSError(errno, os.strerror(errno))
            elif errno == EEXIST:
                if epoll_ctl(self.epfd, EPOLL_CTL_MOD, fd, &ev) < 0:
                    raise OSError(errno, os.strerror(errno))
            else:
                raise OSError(errno, os.strerror(errno))
        watch.registered = wanted

    cdef _narrow(self, int fd, Watch watch, uint32_t wanted):
        cdef epoll_event ev
        ev.events = wanted
        ev.data.u64 = 0
        ev.data.fd = fd
        if epoll_ctl(self.epfd, EPOLL_CTL_MOD, fd, &ev) == 0:
            watch.registered = wanted

    cdef _unregister(self, int fd, Watch watch):
        cdef epoll_event ev
        if watch.registered:
            epoll_ctl(self.epfd, EPOLL_CTL_DEL, fd, &ev)   # gone already if closed
        watch.registered = 0
        del self.watches[fd]

    def forget_fd(self, int fd):
        """``fd`` is about to close: drop its registration now (its number may come back
        as another socket's)."""
        cdef Watch watch = self.watches.get(fd)
        if watch is not None:
            self._unregister(fd, watch)

    cdef _forget(self, Run run):
        """Take ``run`` out of what it waits on (the heap entry goes stale by itself)."""
        run.token = 0
        if run.waiters is not None:
            run.waiters.discard(run)
            run.waiters = None
        if run.link_waiters is not None:
            run.link_waiters.discard(run)
            run.link_waiters = None
        run.fd = -1
        if run.unsubscribe is not None:
            undo, run.unsubscribe = run.unsubscribe, None
            if not isinstance(undo, _Connecting):
                undo()
            else:
                (<_Connecting>undo).abandon()

    cdef _resume(self, Run run, uint64_t token, answer):
        if token == 0 or run.token != token:
            return
        connecting = run.unsubscribe if isinstance(run.unsubscribe, _Connecting) else None
        if connecting is not None:
            run.unsubscribe = None
        self._forget(run)
        run.seen = _Link.wakes
        run.fresh = True
        if connecting is None:
            self.ready.append((run, answer, None))
        else:
            value, error = (<_Connecting>connecting).outcome(answer)
            if value is not None and self.adopt is not None:
                value = self.adopt(value)
            self.ready.append((run, value, error))

    def _resume_outside(self, Run run, uint64_t token):
        """A resume from outside a turn (an event another greenlet set)."""
        self._resume(run, token, True)
        self._kick()

    cdef _kick(self):
        if self.kick is not None:
            self.kick()


cdef class _Connecting:
    """A non-blocking connect in progress: its socket, until it is handed over."""
    cdef object sock

    def __cinit__(self, sock):
        self.sock = sock

    cdef tuple outcome(self, bint writable):
        sock, self.sock = self.sock, None
        if not writable:        # the deadline came first
            sock.close()
            return None, None
        code = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR)
        if code:
            sock.close()
            return None, _connect_error(code)
        return sock, None

    cdef abandon(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


cdef _numeric(request):
    try:
        return _socket.getaddrinfo(request.host, request.port, type=_socket.SOCK_STREAM,
                                   proto=_socket.IPPROTO_TCP, flags=_socket.AI_NUMERICHOST)
    except _socket.gaierror:
        return None


cdef _connect_error(int code):
    if code == ECONNREFUSED:
        return ConnectionRefusedError(code, os.strerror(code))
    return OSError(code, os.strerror(code))
