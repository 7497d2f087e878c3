/*
 * nfqueue_delay: hold every packet of an NFQUEUE queue for a fixed time.
 *
 * The benchmarks' stand-in for netem (this kernel has no sch_netem): inside a
 * network namespace, `iptables -A OUTPUT -o lo -j NFQUEUE --queue-num N`
 * sends every loopback packet here; each is accepted DELAY_MS after it
 * arrived. A packet crosses OUTPUT once per direction, so the round trip
 * grows by 2 x DELAY_MS. The delay is the same for every packet, so the
 * queue stays in arrival order and a FIFO suffices.
 *
 * Run it at real-time priority (chrt -f): under load a normal-priority
 * process is scheduled late and adds delay of its own.
 *
 * usage: nfqueue_delay QUEUE_NUM DELAY_MS
 * Prints "ready" on stdout once the queue is bound; stops on SIGTERM/SIGINT.
 */
#define _GNU_SOURCE /* ppoll */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define RING 65536 /* packets in flight at most; the kernel queue is as long */

struct held {
    uint32_t id;
    int64_t due_ns;
};

static struct held ring[RING];
static size_t head, tail; /* ring[head..tail) are waiting */
static int64_t delay_ns;
static volatile sig_atomic_t stop;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg,
                     struct nfq_data *nfa, void *data)
{
    struct nfqnl_msg_packet_hdr *hdr = nfq_get_msg_packet_hdr(nfa);
    (void)msg;
    (void)data;
    if(!hdr)
        return 0;
    if(tail - head == RING) /* full: let it through rather than drop it */
        return nfq_set_verdict(qh, ntohl(hdr->packet_id), NF_ACCEPT, 0, NULL);
    ring[tail % RING].id = ntohl(hdr->packet_id);
    ring[tail % RING].due_ns = now_ns() + delay_ns;
    tail++;
    return 0;
}

static void release_due(struct nfq_q_handle *qh)
{
    int64_t now = now_ns();
    while(head != tail && ring[head % RING].due_ns <= now) {
        nfq_set_verdict(qh, ring[head % RING].id, NF_ACCEPT, 0, NULL);
        head++;
    }
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    struct nfq_handle *h;
    struct nfq_q_handle *qh;
    char buf[65536] __attribute__((aligned));
    struct pollfd pfd;
    int fd;
    ssize_t n;

    if(argc != 3) {
        fprintf(stderr, "usage: %s QUEUE_NUM DELAY_MS\n", argv[0]);
        return 2;
    }
    delay_ns = (int64_t)(atof(argv[2]) * 1e6);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    h = nfq_open();
    if(!h) {
        perror("nfq_open");
        return 1;
    }
    qh = nfq_create_queue(h, (uint16_t)atoi(argv[1]), on_packet, NULL);
    if(!qh) {
        perror("nfq_create_queue");
        return 1;
    }
    /* Only the verdict matters: no payload is copied to us. */
    if(nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
        perror("nfq_set_mode");
        return 1;
    }
    nfq_set_queue_maxlen(qh, RING);
    /* Accept rather than drop when our queue overflows, and keep the
       kernel's messages to us from being lost under bursts. */
    nfq_set_queue_flags(qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 16 * 1024 * 1024);
    fd = nfq_fd(h);
    printf("ready\n");
    fflush(stdout);

    pfd.fd = fd;
    pfd.events = POLLIN;
    while(!stop) {
        struct timespec timeout, *until = NULL; /* no packet held: wait for one */
        if(head != tail) {
            int64_t wait = ring[head % RING].due_ns - now_ns();
            if(wait < 0)
                wait = 0;
            timeout.tv_sec = wait / 1000000000;
            timeout.tv_nsec = wait % 1000000000;
            until = &timeout;
        }
        if(ppoll(&pfd, 1, until, NULL) > 0) {
            /* Drain everything the kernel has for us before sleeping again. */
            while((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
                nfq_handle_packet(h, buf, (int)n);
            if(n < 0 && errno == ENOBUFS)
                fprintf(stderr, "nfqueue_delay: kernel messages lost (ENOBUFS)\n");
        }
        release_due(qh);
    }
    /* Whatever is still held goes out now, not dropped. */
    while(head != tail) {
        nfq_set_verdict(qh, ring[head % RING].id, NF_ACCEPT, 0, NULL);
        head++;
    }
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
