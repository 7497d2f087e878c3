/*
 * libssh2's own floor for a fan-out: H concurrent logins, each running one command and
 * reading its output and exit status, driven by the least code that can drive libssh2
 * non-blocking (one epoll loop, one state machine per host, no allocation per wait).
 *
 * What it measures: the client CPU (getrusage: user + system) and the wall time of the
 * whole fan-out -- TCP connect, key exchange, host key check (with -K), public key
 * authentication, channel open, exec, output to EOF, close, exit status, disconnect -- on H
 * hosts at once. Process start-up, libssh2_init and reading the known_hosts file are outside the measured interval, as the Python benchmarks leave the imports out. Whatever
 * a client written over libssh2 spends beyond these figures is its own (interpreter, event
 * loop, options), not libssh2's or the protocol's.
 *
 * Built and run by benchmarks/login_floor.py against the libssh2 that the installed `ssh2`
 * package loads:
 *
 *   login_floor -n H -p PORT -u USER -k KEY [-K KNOWN_HOSTS] [-c COMMAND] [-a HOSTKEY_ALGS]
 *               [-m] ADDRESS...
 *
 * The key is read from its file at each login, as our client does with a key file
 * (libssh2_userauth_publickey_fromfile: with our patch 0008 an OpenSSH-format key goes
 * straight to libssh2's parser); -m reads the files once and logs in from memory instead
 * (libssh2_userauth_publickey_frommemory, which asks OpenSSL's PEM reader first: with
 * OpenSSL 3 a decoder set-up per login).
 * Connection i goes to ADDRESS[i % count] (an address may serve several connections).
 * Prints one JSON object: {"hosts", "ok", "cpu", "wall", "maxrss_kib"}; exits 1 if a
 * host failed or the loop stalled (nothing ready for 60 s).
 */
#include <libssh2.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum state { CONNECTING, HANDSHAKE, AUTH, OPEN, EXEC, READ, CLOSE, DONE };

struct host {
    int fd;
    ssize_t last_read;        /* the last recv's size: see quick_recv */
    enum state state;
    unsigned events;          /* what epoll waits for on fd now */
    int exit_status;
    const char *address;
    LIBSSH2_SESSION *session;
    LIBSSH2_CHANNEL *channel;
};

static const char *user, *command = "echo hello", *key_path;
static char public_path[4096];
static char *private_key, *public_key;   /* -m: the key files' contents */
static size_t private_len, public_len;
static int from_memory;
static LIBSSH2_KNOWNHOSTS *known;  /* NULL: host keys not checked */
static int port, epoll_fd;

static double cpu_seconds(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6
         + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data;
    long size;
    if(!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        perror(path);
        exit(2);
    }
    data = malloc((size_t)size + 1);
    if(!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        perror(path);
        exit(2);
    }
    data[size] = 0;
    fclose(f);
    *len = (size_t)size;
    return data;
}

/* libssh2's recv, acknowledging at once (TCP_QUICKACK) when it is about to wait for an
 * answer after a short read, as our ssh2 package does: sshd keeps Nagle on for sessions
 * without a pty, and its answer would otherwise sit behind the client's delayed ACK
 * (~40 ms a round trip on loopback). Bulk reads are left alone. */
static LIBSSH2_RECV_FUNC(quick_recv)
{
    struct host *h = *abstract;
    ssize_t rc = recv(socket, buffer, length, flags);
    if(rc > 0)
        h->last_read = rc;
    else if(rc < 0) {
        int err = errno, one = 1;
        if(err == EAGAIN && h->last_read < 4096)
            setsockopt(socket, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
        return -err;
    }
    return rc;
}

/* Wait in the direction libssh2 asks for; epoll_ctl only when that changes. */
static void wait_for(struct host *h)
{
    unsigned events = EPOLLIN;
    struct epoll_event e;
    if(h->session) {
        int dir = libssh2_session_block_directions(h->session);
        events = ((dir & LIBSSH2_SESSION_BLOCK_INBOUND) ? EPOLLIN : 0)
               | ((dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) ? EPOLLOUT : 0);
        if(!events)
            events = EPOLLIN;
    }
    if(events == h->events)
        return;
    memset(&e, 0, sizeof e);
    e.events = events;
    e.data.ptr = h;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, h->fd, &e);
    h->events = events;
}

static int host_key_ok(struct host *h)
{
    size_t len;
    int type;
    const char *key;
    if(!known)
        return 1;
    key = libssh2_session_hostkey(h->session, &len, &type);
    return key && libssh2_knownhost_checkp(known, h->address, port, key, len,
                                           LIBSSH2_KNOWNHOST_TYPE_PLAIN
                                           | LIBSSH2_KNOWNHOST_KEYENC_RAW, NULL)
                  == LIBSSH2_KNOWNHOST_CHECK_MATCH;
}

/* After a call that returns 0, LIBSSH2_ERROR_EAGAIN or an error: 1 when it is done (the
 * host moves on to `next`), 0 to wait, -`failed` on an error. */
static int went(struct host *h, int rc, enum state next, int failed)
{
    if(rc == LIBSSH2_ERROR_EAGAIN)
        return 0;
    if(rc)
        return -failed;
    h->state = next;
    return 1;
}

/* Advance one host as far as it goes without waiting: 0 to wait, 1 done, < 0 failed. */
static int step(struct host *h, const char *hostkey_algs)
{
    char buf[16384];
    int rc, err = 0;
    socklen_t len = sizeof err;
    for(;;) {
        switch(h->state) {
        case CONNECTING:
            if(getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
                return -1;
            h->session = libssh2_session_init_ex(NULL, NULL, NULL, h);
            libssh2_session_callback_set2(h->session, LIBSSH2_CALLBACK_RECV,
                                          (libssh2_cb_generic *)quick_recv);
            libssh2_session_set_blocking(h->session, 0);
            if(hostkey_algs)
                libssh2_session_method_pref(h->session, LIBSSH2_METHOD_HOSTKEY, hostkey_algs);
            h->state = HANDSHAKE;
            break;
        case HANDSHAKE:
            rc = went(h, libssh2_session_handshake(h->session, h->fd), AUTH, 2);
            if(rc == 1 && !host_key_ok(h))
                return -2;
            if(rc != 1)
                return rc;
            break;
        case AUTH:
            rc = went(h, from_memory
                      ? libssh2_userauth_publickey_frommemory(h->session, user, strlen(user),
                                                              public_key, public_len,
                                                              private_key, private_len, NULL)
                      : libssh2_userauth_publickey_fromfile(h->session, user, public_path,
                                                            key_path, NULL), OPEN, 3);
            if(rc != 1)
                return rc;
            break;
        case OPEN:
            h->channel = libssh2_channel_open_session(h->session);
            if(!h->channel)
                return libssh2_session_last_errno(h->session) == LIBSSH2_ERROR_EAGAIN ? 0 : -4;
            h->state = EXEC;
            break;
        case EXEC:
            rc = went(h, libssh2_channel_exec(h->channel, command), READ, 5);
            if(rc != 1)
                return rc;
            break;
        case READ:
            rc = (int)libssh2_channel_read(h->channel, buf, sizeof buf);
            if(rc > 0)
                break;
            if(rc == LIBSSH2_ERROR_EAGAIN)
                return 0;
            if(rc < 0)
                return -6;
            if(!libssh2_channel_eof(h->channel))
                return 0;       /* 0 without EOF: only other packets were read */
            h->state = CLOSE;
            break;
        case CLOSE:
            rc = libssh2_channel_close(h->channel);
            if(rc == LIBSSH2_ERROR_EAGAIN)
                return 0;
            h->exit_status = libssh2_channel_get_exit_status(h->channel);
            /* Loopback's send buffer takes the last packets at once: EAGAIN is not
             * expected here, and a host whose goodbye was lost is still done. */
            libssh2_channel_free(h->channel);
            libssh2_session_disconnect(h->session, "done");
            libssh2_session_free(h->session);
            close(h->fd);
            h->state = DONE;
            return 1;
        case DONE:
            return 1;
        }
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: login_floor -n H -p PORT -u USER -k KEY [-K KNOWN_HOSTS] "
                    "[-c COMMAND] [-a HOSTKEY_ALGS] [-m] ADDRESS...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *known_hosts = NULL, *hostkey_algs = NULL;
    int count = 0, opt, left, ok = 0, addresses;
    struct host *hosts;
    struct epoll_event ready[256];
    double cpu0, wall0;
    struct rusage ru;

    while((opt = getopt(argc, argv, "n:p:u:k:K:c:a:m")) != -1) {
        switch(opt) {
        case 'n': count = atoi(optarg); break;
        case 'p': port = atoi(optarg); break;
        case 'u': user = optarg; break;
        case 'k': key_path = optarg; break;
        case 'K': known_hosts = optarg; break;
        case 'c': command = optarg; break;
        case 'a': hostkey_algs = optarg; break;
        case 'm': from_memory = 1; break;
        default: usage();
        }
    }
    addresses = argc - optind;
    if(count < 1 || !port || !user || !key_path || addresses < 1)
        usage();

    libssh2_init(0);
    snprintf(public_path, sizeof public_path, "%s.pub", key_path);
    if(from_memory) {
        private_key = read_file(key_path, &private_len);
        public_key = read_file(public_path, &public_len);
    }
    if(known_hosts) {
        /* One collection for every host, read once (libssh2 ties it to a session only
         * for allocation and error messages). */
        LIBSSH2_SESSION *owner = libssh2_session_init();
        known = libssh2_knownhost_init(owner);
        if(libssh2_knownhost_readfile(known, known_hosts, LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0) {
            fprintf(stderr, "cannot read %s\n", known_hosts);
            return 2;
        }
    }
    epoll_fd = epoll_create1(0);
    hosts = calloc((size_t)count, sizeof *hosts);

    cpu0 = cpu_seconds();
    wall0 = now();
    for(int i = 0; i < count; i++) {
        struct host *h = &hosts[i];
        struct sockaddr_in sa;
        struct epoll_event e;
        int one = 1;
        h->address = argv[optind + i % addresses];
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons((unsigned short)port);
        if(inet_pton(AF_INET, h->address, &sa.sin_addr) != 1) {
            fprintf(stderr, "not an IPv4 address: %s\n", h->address);
            return 2;
        }
        h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if(connect(h->fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS) {
            perror("connect");
            return 1;
        }
        memset(&e, 0, sizeof e);
        e.events = h->events = EPOLLOUT;   /* writable: connected */
        e.data.ptr = h;
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, h->fd, &e);
    }
    for(left = count; left;) {
        int n = epoll_wait(epoll_fd, ready, 256, 60000);
        if(n <= 0) {
            fprintf(stderr, "stalled: %d of %d hosts unfinished\n", left, count);
            return 1;
        }
        for(int j = 0; j < n; j++) {
            struct host *h = ready[j].data.ptr;
            int rc = step(h, hostkey_algs);
            if(rc < 0) {
                char *msg = NULL;
                if(h->session)
                    libssh2_session_last_error(h->session, &msg, NULL, 0);
                fprintf(stderr, "%s failed at step %d: %s\n", h->address, -rc,
                        msg ? msg : strerror(errno));
                return 1;
            }
            if(rc == 1) {
                left--;
                ok += h->exit_status == 0;
            }
            else
                wait_for(h);
        }
    }
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"hosts\": %d, \"ok\": %d, \"cpu\": %.6f, \"wall\": %.6f, \"maxrss_kib\": %ld}\n",
           count, ok, cpu_seconds() - cpu0, now() - wall0, ru.ru_maxrss);
    return ok == count ? 0 : 1;
}
