/* SPDX-License-Identifier: MIT */
/*
 * The raw liburing echo server: echo_uring --port P [--threads N]
 *
 * Hand-written io_uring with no coroutines and no library between the loop
 * and the ring: the ceiling coring must approach. Each thread owns a ring
 * set up with SINGLE_ISSUER | DEFER_TASKRUN (falling back to COOP_TASKRUN,
 * then none), a registered ring fd, a multishot accept on its own
 * SO_REUSEPORT listener, and one operation in flight per connection:
 * recv, then send (MSG_WAITALL: the kernel finishes a short send itself),
 * then recv again. The loop is one io_uring_submit_and_wait per turn, then
 * every CQE in one batch. user_data is the connection pointer with the
 * operation in its low bits. SIGINT/SIGTERM: a poll on the stop signalfd,
 * armed in every ring, completes; the loops end, exit 0.
 */
#include <poll.h>
#include <liburing.h>

#include "bench_util.h"
#include "uring_util.h"

enum { OP_RECV = 0, OP_SEND = 1, OP_ACCEPT = 2, OP_STOP = 3 };

struct conn {
	int fd;
	char buf[BENCH_BUF_SIZE];
} __attribute__((aligned(8)));

struct worker {
	struct io_uring ring;
	int lfd, stop_fd;
};

static void prep_recv(struct io_uring *r, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(r);

	io_uring_prep_recv(sqe, c->fd, c->buf, sizeof c->buf, 0);
	set_data(sqe, c, OP_RECV);
}

static void prep_accept(struct worker *w)
{
	struct io_uring_sqe *sqe = get_sqe(&w->ring);

	io_uring_prep_multishot_accept(sqe, w->lfd, NULL, NULL, SOCK_CLOEXEC);
	set_data(sqe, NULL, OP_ACCEPT);
}

static void on_accept(struct worker *w, int res, unsigned flags)
{
	if (res >= 0) {
		struct conn *c = malloc(sizeof *c);
		if (c == NULL) {
			close(res);
		} else {
			bench_conn_opts(res);
			c->fd = res;
			prep_recv(&w->ring, c);
		}
	}
	if (!(flags & IORING_CQE_F_MORE)) {
		if (res < 0 && res != -ECONNABORTED)
			usleep(1000); /* EMFILE and friends: back off, then accept again */
		prep_accept(w);
	}
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	free(c);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct io_uring *r = &w->ring;
	int stop = 0;

	ring_enable(r);
	prep_accept(w);
	struct io_uring_sqe *sqe = get_sqe(r);
	io_uring_prep_poll_add(sqe, w->stop_fd, POLLIN);
	set_data(sqe, NULL, OP_STOP);

	while (!stop) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int ret = io_uring_submit_and_wait(r, 1);

		if (ret < 0 && ret != -EINTR && ret != -ETIME && ret != -EAGAIN && ret != -EBUSY) {
			fprintf(stderr, "echo_uring: submit_and_wait: %s\n", strerror(-ret));
			break;
		}
		io_uring_for_each_cqe(r, head, cqe) {
			uint64_t ud = cqe->user_data;
			struct conn *c = (struct conn *)(uintptr_t)(ud & ~(uint64_t)3);
			int res = cqe->res;

			n++;
			switch (ud & 3) {
			case OP_RECV:
				if (res <= 0) {
					conn_close(c);
					break;
				}
				sqe = get_sqe(r);
				io_uring_prep_send(sqe, c->fd, c->buf, (size_t)res,
						   MSG_WAITALL | MSG_NOSIGNAL);
				set_data(sqe, c, OP_SEND);
				break;
			case OP_SEND:
				if (res <= 0)
					conn_close(c);
				else
					prep_recv(r, c);
				break;
			case OP_ACCEPT:
				on_accept(w, res, cqe->flags);
				break;
			default:
				stop = 1;
				break;
			}
		}
		io_uring_cq_advance(r, n);
	}
	/* Connections still open are closed by exit; the ring's exit cancels
	 * their operations. */
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	struct worker *ws = calloc((size_t)a.threads, sizeof *ws);
	int stop_fd = bench_stop_fd("echo_uring");

	if (ws == NULL)
		return 1;
	for (int i = 0; i < a.threads; i++) {
		int ret;

		ws[i].stop_fd = stop_fd;
		ws[i].lfd = bench_listen(&a.port);
		if (ws[i].lfd < 0) {
			perror("echo_uring: listen");
			return 1;
		}
		if ((ret = ring_init(&ws[i].ring, 4096)) < 0) {
			fprintf(stderr, "echo_uring: io_uring: %s\n", strerror(-ret));
			return 1;
		}
	}
	bench_run("echo_uring", &a, ws, sizeof *ws, worker_main);
	for (int i = 0; i < a.threads; i++) {
		io_uring_queue_exit(&ws[i].ring);
		close(ws[i].lfd);
	}
	close(stop_fd);
	free(ws);
	return 0;
}
