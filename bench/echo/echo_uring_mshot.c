/* SPDX-License-Identifier: MIT */
/*
 * The second raw liburing echo server: echo_uring_mshot --port P [--threads N]
 *
 * What a hand-written server can get from the kernel's newer interfaces,
 * beside the simple echo_uring (one recv, then one send, per connection):
 *   - one multishot recv per connection, armed once, receiving into a ring
 *     of provided buffers shared by all connections of the thread (no
 *     receive buffer per connection, no recv SQE per message);
 *   - the answer is sent straight from the provided buffers (no copy), one
 *     send in flight per connection; whatever arrived meanwhile goes out in
 *     the next send, several buffers at once with sendmsg (batched sends);
 *   - a buffer goes back to the ring when its bytes are sent, all the
 *     returns of a loop turn published with one store;
 *   - as echo_uring: SINGLE_ISSUER | DEFER_TASKRUN (falling back to
 *     COOP_TASKRUN, then none), a registered ring fd, multishot accept, one
 *     io_uring_submit_and_wait per turn and every CQE of the turn in one
 *     batch.
 * When the ring has no free buffer the kernel ends a connection's multishot
 * recv with -ENOBUFS; the connection is re-armed at the end of a turn that
 * returned buffers. A client that sends and does not read holds its
 * buffers while its send waits: past HIGH_WATER buffers its recv is
 * cancelled, and re-armed once everything it holds is sent, so it cannot
 * take the ring from the others. A connection whose peer closed is closed
 * once its last send completed; one closed for an error is shut down
 * first, so its multishot recv ends before its memory is freed.
 * user_data is the connection pointer with the operation in its low bits.
 * SIGINT/SIGTERM: a poll on the stop signalfd, armed in every ring,
 * completes; the loops end, exit 0.
 */
#include <poll.h>
#include <sys/mman.h>
#include <liburing.h>

#include "bench_util.h"
#include "uring_util.h"

enum { OP_RECV = 0, OP_SEND = 1, OP_ACCEPT = 2, OP_STOP = 3, OP_CANCEL = 4 };
#define OP_MASK 7u

#define BGID 0
#define BUF_SIZE 4096           /* one provided buffer */
#define BUF_COUNT 4096          /* buffers per thread, a power of two */
#define MAX_IOV 16              /* buffers in one sendmsg */
#define QUEUE 256               /* received buffers a connection may hold */
#define HIGH_WATER 64           /* ... before its recv is paused */

struct conn {
	int fd;
	unsigned char recv_armed, send_busy, peer_closed, failed;
	unsigned char paused;        /* recv cancelled: its peer is far ahead */
	unsigned char starved;       /* on the worker's starved list */
	unsigned head, n;            /* the received buffers not yet sent: a ring */
	unsigned sending;            /* how many of them the send in flight holds */
	unsigned off;                /* bytes of the first one already sent */
	struct conn *next_starved;   /* waiting for buffers to re-arm its recv */
	unsigned short bid[QUEUE];
	unsigned len[QUEUE];
	struct msghdr msg;
	struct iovec iov[MAX_IOV];
} __attribute__((aligned(8))); /* user_data keeps the operation in 3 bits */

struct worker {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	char *bufs;
	unsigned returned;           /* buffers added to br this turn */
	unsigned free_bufs;          /* buffers the kernel may still pick */
	struct conn *starved;        /* connections whose recv got -ENOBUFS */
	int lfd, stop_fd;
};

static void arm_recv(struct worker *w, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&w->ring);

	io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	set_data(sqe, c, OP_RECV);
	c->recv_armed = 1;
}

static void prep_accept(struct worker *w)
{
	struct io_uring_sqe *sqe = get_sqe(&w->ring);

	io_uring_prep_multishot_accept(sqe, w->lfd, NULL, NULL, SOCK_CLOEXEC);
	set_data(sqe, NULL, OP_ACCEPT);
}

static inline char *buf_of(struct worker *w, unsigned bid)
{
	return w->bufs + (size_t)bid * BUF_SIZE;
}

/* Give a buffer back to the kernel (published at the end of the turn). */
static inline void buf_return(struct worker *w, unsigned bid)
{
	io_uring_buf_ring_add(w->br, buf_of(w, bid), BUF_SIZE, (unsigned short)bid,
			      io_uring_buf_ring_mask(BUF_COUNT), (int)w->returned);
	w->returned++;
}

/* Send what the connection holds: one buffer with send, several with
 * sendmsg. MSG_WAITALL: the kernel finishes a short send itself. */
static void send_pending(struct worker *w, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&w->ring);
	unsigned k = c->n < MAX_IOV ? c->n : MAX_IOV;

	if (k == 1) {
		unsigned b = c->head;
		io_uring_prep_send(sqe, c->fd, buf_of(w, c->bid[b]) + c->off, c->len[b] - c->off,
				   MSG_WAITALL | MSG_NOSIGNAL);
	} else {
		for (unsigned i = 0; i < k; i++) {
			unsigned b = (c->head + i) % QUEUE;
			c->iov[i].iov_base = buf_of(w, c->bid[b]) + (i ? 0 : c->off);
			c->iov[i].iov_len = c->len[b] - (i ? 0 : c->off);
		}
		c->msg.msg_iov = c->iov;
		c->msg.msg_iovlen = k;
		io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_WAITALL | MSG_NOSIGNAL);
	}
	set_data(sqe, c, OP_SEND);
	c->sending = k;
	c->send_busy = 1;
}

/* Stop receiving for a client far ahead of its reads. */
static void pause_recv(struct worker *w, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&w->ring);

	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)c | OP_RECV, 0);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	set_data(sqe, c, OP_CANCEL);
	c->paused = 1;
}

/* Drop the connection's buffers; close it once nothing of it is in
 * flight (a recv still armed is ended by the shutdown) and it is off the
 * starved list. */
static void conn_end(struct worker *w, struct conn *c)
{
	if (!c->failed && c->recv_armed)
		shutdown(c->fd, SHUT_RDWR);
	c->failed = 1;
	if (c->send_busy || c->recv_armed || c->starved)
		return;
	for (; c->n; c->n--, c->head = (c->head + 1) % QUEUE)
		buf_return(w, c->bid[c->head]);
	close(c->fd);
	free(c);
}

static void on_recv(struct worker *w, struct conn *c, int res, unsigned flags)
{
	if (!(flags & IORING_CQE_F_MORE))
		c->recv_armed = 0;
	if (res > 0) {
		unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;

		w->free_bufs--;
		if (c->failed || c->n == QUEUE) { /* past the pause's slack: give up */
			buf_return(w, bid);
			conn_end(w, c);
			return;
		}
		c->bid[(c->head + c->n) % QUEUE] = (unsigned short)bid;
		c->len[(c->head + c->n) % QUEUE] = (unsigned)res;
		c->n++;
		if (!c->send_busy)
			send_pending(w, c);
		if (c->recv_armed && !c->paused && c->n >= HIGH_WATER)
			pause_recv(w, c);
		else if (!c->recv_armed && !c->paused)
			arm_recv(w, c); /* the kernel ended it early (CQ full ...) */
		return;
	}
	if (c->paused && !c->failed && (res == -ECANCELED || res == -ENOBUFS)) {
		if (!c->recv_armed && c->n == 0) /* all sent meanwhile */
			c->paused = 0, arm_recv(w, c);
		return;
	}
	if (res == -ENOBUFS && !c->failed) {
		c->starved = 1;
		c->next_starved = w->starved;
		w->starved = c;
		return;
	}
	if (res == 0 && !c->failed) { /* the peer closed: send what is left first */
		c->peer_closed = 1;
		if (!c->send_busy)
			conn_end(w, c);
		return;
	}
	if (!c->recv_armed)
		conn_end(w, c);
}

static void on_send(struct worker *w, struct conn *c, int res)
{
	unsigned k = c->sending;

	c->send_busy = 0;
	if (res <= 0 || c->failed) {
		conn_end(w, c);
		return;
	}
	/* retire the buffers sent in full; a short send (an error under
	 * MSG_WAITALL, or a signal) leaves the rest for the next send */
	for (unsigned sent = (unsigned)res; k && c->n; k--) {
		unsigned left = c->len[c->head] - c->off;
		if (sent < left) {
			c->off += sent;
			break;
		}
		sent -= left;
		c->off = 0;
		buf_return(w, c->bid[c->head]);
		c->head = (c->head + 1) % QUEUE;
		c->n--;
	}
	if (c->n)
		send_pending(w, c);
	else if (c->peer_closed)
		conn_end(w, c);
	else if (c->paused && !c->recv_armed) /* caught up: receive again */
		c->paused = 0, arm_recv(w, c);
}

static void on_accept(struct worker *w, int res, unsigned flags)
{
	if (res >= 0) {
		struct conn *c = calloc(1, sizeof *c);
		if (c == NULL) {
			close(res);
		} else {
			bench_conn_opts(res);
			c->fd = res;
			arm_recv(w, c);
		}
	}
	if (!(flags & IORING_CQE_F_MORE)) {
		if (res < 0 && res != -ECONNABORTED)
			usleep(1000); /* EMFILE and friends: back off, then accept again */
		prep_accept(w);
	}
}

/* End of a turn: publish the returned buffers, re-arm starved recvs. */
static void end_turn(struct worker *w)
{
	if (w->returned) {
		io_uring_buf_ring_advance(w->br, (int)w->returned);
		w->free_bufs += w->returned;
		w->returned = 0;
	}
	while (w->starved && w->free_bufs) {
		struct conn *c = w->starved;
		w->starved = c->next_starved;
		c->starved = 0;
		if (c->failed || c->peer_closed)
			conn_end(w, c);
		else
			arm_recv(w, c);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct io_uring *r = &w->ring;
	struct io_uring_buf_reg reg = { 0 };
	int stop = 0, ret;

	ring_enable(r);
	reg.ring_addr = (uint64_t)(uintptr_t)w->br;
	reg.ring_entries = BUF_COUNT;
	reg.bgid = BGID;
	if ((ret = io_uring_register_buf_ring(r, &reg, 0)) < 0) {
		fprintf(stderr, "echo_uring_mshot: buffer ring: %s\n", strerror(-ret));
		exit(1);
	}
	io_uring_buf_ring_init(w->br);
	for (unsigned i = 0; i < BUF_COUNT; i++)
		buf_return(w, i);
	w->free_bufs = 0;
	end_turn(w);
	prep_accept(w);
	struct io_uring_sqe *sqe = get_sqe(r);
	io_uring_prep_poll_add(sqe, w->stop_fd, POLLIN);
	set_data(sqe, NULL, OP_STOP);

	while (!stop) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		ret = io_uring_submit_and_wait(r, 1);
		if (ret < 0 && ret != -EINTR && ret != -ETIME && ret != -EAGAIN && ret != -EBUSY) {
			fprintf(stderr, "echo_uring_mshot: submit_and_wait: %s\n", strerror(-ret));
			break;
		}
		io_uring_for_each_cqe(r, head, cqe) {
			uint64_t ud = cqe->user_data;
			struct conn *c = (struct conn *)(uintptr_t)(ud & ~(uint64_t)OP_MASK);

			n++;
			switch (ud & OP_MASK) {
			case OP_RECV:
				on_recv(w, c, cqe->res, cqe->flags);
				break;
			case OP_SEND:
				on_send(w, c, cqe->res);
				break;
			case OP_ACCEPT:
				on_accept(w, cqe->res, cqe->flags);
				break;
			case OP_CANCEL: /* the recv had ended already: nothing to do */
				break;
			default:
				stop = 1;
				break;
			}
		}
		io_uring_cq_advance(r, n);
		end_turn(w);
	}
	/* Connections still open are closed by exit; the ring's exit cancels
	 * their operations. */
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	struct worker *ws = calloc((size_t)a.threads, sizeof *ws);
	int stop_fd = bench_stop_fd("echo_uring_mshot");

	if (ws == NULL)
		return 1;
	for (int i = 0; i < a.threads; i++) {
		struct worker *w = &ws[i];
		size_t rsize = BUF_COUNT * sizeof(struct io_uring_buf);
		int ret;

		w->stop_fd = stop_fd;
		w->lfd = bench_listen(&a.port);
		w->br = mmap(NULL, rsize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		w->bufs = malloc((size_t)BUF_COUNT * BUF_SIZE);
		if (w->lfd < 0 || w->br == MAP_FAILED || w->bufs == NULL) {
			perror("echo_uring_mshot: setup");
			return 1;
		}
		if ((ret = ring_init(&w->ring, 4 * BUF_COUNT)) < 0) {
			fprintf(stderr, "echo_uring_mshot: io_uring: %s\n", strerror(-ret));
			return 1;
		}
	}
	bench_run("echo_uring_mshot", &a, ws, sizeof *ws, worker_main);
	for (int i = 0; i < a.threads; i++) {
		io_uring_queue_exit(&ws[i].ring);
		munmap(ws[i].br, BUF_COUNT * sizeof(struct io_uring_buf));
		free(ws[i].bufs);
		close(ws[i].lfd);
	}
	close(stop_fd);
	free(ws);
	return 0;
}
