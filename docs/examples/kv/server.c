/* SPDX-License-Identifier: MIT */
/*
 * server.c - the coring side of the server: per context a listener
 * (co_listen's SO_REUSEPORT socket, co_accept), a sweeper (co_sleep every
 * 100 ms: the tick, idle connections, expired keys) and a shard; per
 * connection a coroutine that reads requests with coring's reader, runs
 * each command (moving to the context that owns each key with
 * co_transfer_to, and back) and sends the answers; the stop on SIGTERM
 * (co_signals_wait): quiesce every context, let the connections drain
 * within a time limit (co_timeout over an event), then a cancel stop.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "kv.h"

static struct conn *conn_of_keys(co_frame *f)
{
	return (struct conn *)(void *)((char *)f - offsetof(struct conn, keys));
}

/* ---- sending answers ---------------------------------------------------------------------------- */

/* The connection did something: stamp it with its home's tick. */
static void conn_active(struct conn *c)
{
	atomic_store_explicit(&c->seen, atomic_load_explicit(&c->home->tick, memory_order_relaxed),
			      memory_order_relaxed);
}

/* Send every answer buffered. A peer that does not read stops the sends:
 * the sweeper ends such a connection once it has been idle too long. */
static int flush_fn(co_frame *f)
{
	struct flusher *fl = (struct flusher *)f;
	struct conn *c = fl->c;

	CO_BEGIN(f);
	for (fl->done = 0; fl->done < fl->c->olen;) {
		CO_AWAIT(f, co_send(&fl->io, c->fd, c->out + fl->done, c->olen - fl->done, MSG_NOSIGNAL));
		if (co_result(f) <= 0)
			CO_RETURN(f, co_result(f) < 0 ? co_result(f) : -EPIPE);
		fl->done += (size_t)co_result(f);
		conn_active(c);
	}
	fl->c->olen = 0;
	CO_END(f);
}

static co_frame *flush(struct conn *c)
{
	co_init(&c->fl.co, flush_fn);
	c->fl.c = c;
	return &c->fl.co;
}

/* ---- a connection ------------------------------------------------------------------------------- */

void conn_free(struct conn *c)
{
	co_event_destroy(&c->wake);
	free(c->bw);
	free(c->elem);
	if (c->held)
		item_free(c->held);
	co_reader_destroy(&c->rd);
	free(c->args);
	free(c->abuf);
	free(c->out);
	free(c);
}

/* Off its home's list, before its descriptor is closed: the sweeper and
 * the stop shut down the descriptors of the listed connections, and a
 * closed one's number may be a new connection's already. */
static void conn_unlink(struct conn *c)
{
	struct ctx *x = c->home;

	pthread_mutex_lock(&x->lock);
	if (c->linked) {
		if (c->prev)
			c->prev->next = c->next;
		else
			x->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		c->linked = 0;
	}
	pthread_mutex_unlock(&x->lock);
}

static void conn_done(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	conn_unlink(c); /* (a frame the cancel stop finished before it ran) */
	if (atomic_load(&c->nlinked) > 0) /* nodes in queues still: blocked_free frees it */
		c->orphan = 2;
	else
		conn_free(c);
	if (atomic_fetch_sub(&srv.live, 1) == 1 && atomic_load(&srv.stopping))
		co_event_set(&srv.all_closed);
}

/* Run the command's key parts, each on the context that owns its key,
 * and come home: a child of the connection (its awaits are transfers). */
static int keys_fn(co_frame *f)
{
	struct conn *c = conn_of_keys(f);

	CO_BEGIN(f);
	while ((c->cur = command_next(c, &c->owner)) != 0) {
		if (c->owner != c->where) {
			CO_AWAIT(f, co_transfer_to(&c->tr, &srv.s.ctx[c->owner]));
			if (co_result(f) < 0) { /* the stop was faster: the command ends here */
				reply_error(c, "ERR server is stopping");
				c->cmd = NULL;
				c->closing = 1;
				break;
			}
			c->where = c->owner;
		}
		command_run_key(c, c->cur);
	}
	if (c->where != c->home->idx) {
		CO_AWAIT(f, co_transfer_to(&c->tr, &srv.s.ctx[c->home->idx]));
		if (co_result(f) == 0) /* (else it goes on where it is) */
			c->where = c->home->idx;
	}
	CO_END(f);
}

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;
	int took;

	CO_BEGIN(f);
	while (!c->closing) {
		c->rf = request_read(c);
		if (!co_done(c->rf) && c->olen > 0) { /* about to wait: answer first */
			CO_AWAIT(f, flush(c));
			if (co_result(f) < 0)
				break;
		}
		CO_AWAIT(f, c->rf);
		if (co_result(f) <= 0) {
			request_failed(c, co_result(f));
			break;
		}
		if ((took = request_take(c, c->rd.data, c->rd.len)) < 0)
			break;
		if (took == 0)
			continue;
		conn_active(c);
		command_start(c);
		while (c->cmd && (c->ki != 0 || c->blocked)) {
			if (srv.threads == 1) { /* one shard: no moves */
				while ((c->cur = command_next(c, &c->owner)) != 0)
					command_run_key(c, c->cur);
			} else if (c->ki != 0) { /* keys to visit, on several shards */
				co_init(&c->keys, keys_fn);
				CO_AWAIT(f, &c->keys);
			}
			if (c->blocked) /* BLPOP, BRPOP, BLMOVE: the wait (blocking.c) */
				CO_AWAIT(f, block_wait(c));
		}
		command_finish(c);
		if (c->olen >= OUT_FLUSH) {
			CO_AWAIT(f, flush(c));
			if (co_result(f) < 0)
				break;
		}
	}
	if (c->olen > 0)
		CO_AWAIT(f, flush(c));
	/* the end of the answers first: a close with bytes unread (a request
	 * cut short) sends a reset, which may come after it but not before */
	shutdown(c->fd, SHUT_WR);
	conn_unlink(c);
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

/* A connection on context x for fd: linked in x's list, spawned there. */
static void conn_start(struct ctx *x, int fd)
{
	struct conn *c = calloc(1, sizeof *c);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (c == NULL ||
	    co_reader_init(&c->rd, fd, &(co_reader_opts){ .size = 4096, .max = LINE_MAX_BYTES + 2 }) < 0) {
		free(c);
		close(fd);
		return;
	}
	co_event_init(&c->wake, 0);
	c->id = atomic_fetch_add(&srv.next_id, 1) + 1;
	c->fd = fd;
	c->home = x;
	c->where = x->idx;
	conn_active(c);
	co_init(&c->co, conn_fn);
	c->co.on_done = conn_done;
	atomic_fetch_add(&srv.live, 1);
	pthread_mutex_lock(&x->lock);
	c->next = x->conns;
	if (x->conns)
		x->conns->prev = c;
	x->conns = c;
	c->linked = 1;
	pthread_mutex_unlock(&x->lock);
	if (co_engine_spawn(co_engine_current(), &c->co) < 0) { /* the stop came first */
		close(fd);
		conn_done(&c->co);
	}
}

/* ---- per context: listener, sweeper; the stop ---------------------------------------------------- */

static int listener_fn(co_frame *f)
{
	struct listener *l = (struct listener *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_accept(&l->io, l->lfd, NULL, NULL, SOCK_CLOEXEC));
		if (co_result(f) == -ECANCELED)
			break;
		if (co_result(f) >= 0 && atomic_load(&srv.stopping)) {
			close(co_result(f)); /* accepted as the stop began */
		} else if (co_result(f) >= 0) {
			conn_start(l->x, co_result(f));
		} else { /* out of descriptors or memory: back off, keep serving */
			CO_AWAIT(f, co_sleep(&l->io, 10 * CO_MS));
			if (co_result(f) == -ECANCELED)
				break;
		}
	}
	CO_END(f);
}

/* End the connections of x idle for longer than the timeout: a shutdown
 * ends their wait for a request (0) or for a send (-EPIPE). */
static void sweep_idle(struct ctx *x, unsigned tick)
{
	unsigned limit = (unsigned)(srv.idle_ns / (100 * CO_MS));
	struct conn *c;

	if (srv.idle_ns == 0)
		return;
	pthread_mutex_lock(&x->lock);
	for (c = x->conns; c; c = c->next)
		if (tick - atomic_load_explicit(&c->seen, memory_order_relaxed) > limit)
			shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&x->lock);
}

/* Every 100 ms: the tick, idle connections, and a slice of the table's
 * expired keys (those nobody asks for go too). */
static int sweeper_fn(co_frame *f)
{
	struct sweeper *w = (struct sweeper *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_sleep(&w->io, 100 * CO_MS));
		if (co_result(f) == -ECANCELED)
			break;
		sweep_idle(w->x, atomic_fetch_add(&w->x->tick, 1) + 1);
		shard_sweep(&w->x->sh, 256);
	}
	CO_END(f);
}

/* On each context once the stop began: no more accepts, no more sweeps,
 * and every connection reads to the end of what it has received (a
 * shutdown of the reading side: its next wait for bytes ends with 0). */
static int quiesce_fn(co_frame *f)
{
	struct quiesce *q = (struct quiesce *)f;
	struct conn *c;

	CO_BEGIN(f);
	co_cancel(&q->x->lis.co);
	co_cancel(&q->x->sw.co);
	pthread_mutex_lock(&q->x->lock);
	for (c = q->x->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RD);
	pthread_mutex_unlock(&q->x->lock);
	block_wake_all(q->x); /* and those that wait in BLPOP answer a nil */
	CO_END(f);
}

struct stopper {
	co_frame co;
	co_waiter w;
	co_limit lim;
	co_view view;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *st = (struct stopper *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_signals_wait(&srv.sigs));
		if (co_result(f) != SIGUSR1)
			break;
		if (co_view_sched(&st->view, &srv.s, CO_VIEW_WAIT) == 0) { /* SIGUSR1: a look */
			co_view_print(&st->view, STDERR_FILENO, 0);
			co_view_free(&st->view);
		}
	}
	atomic_store(&srv.stopping, 1);
	for (unsigned i = 0; i < srv.threads; i++) {
		co_init(&srv.ctx[i].q.co, quiesce_fn);
		co_sched_spawn_to(&srv.s, i, &srv.ctx[i].q.co);
	}
	if (atomic_load(&srv.live) > 0) {
		CO_AWAIT(f, co_timeout(&st->lim, co_event_wait(&st->w, &srv.all_closed), srv.grace_ns));
		if (co_result(f) < 0)
			co_sched_stop(&srv.s, CO_STOP_CANCEL); /* the grace is over */
	}
	CO_END(f);
}

/* The contexts' listeners (one port, SO_REUSEPORT), shards, sweepers. */
static int setup_contexts(void)
{
	int port = srv.port;

	srv.ctx = calloc(srv.threads, sizeof *srv.ctx);
	if (srv.ctx == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < srv.threads; i++) {
		struct ctx *x = &srv.ctx[i];
		int fd = co_listen(srv.bind, port, 0, CO_LISTEN_REUSEPORT);

		if (fd < 0)
			return fd;
		port = co_local_port(fd);
		x->idx = i;
		x->lis.lfd = fd;
		x->lis.x = x;
		x->sw.x = x;
		x->q.x = x;
		pthread_mutex_init(&x->lock, NULL);
		if (shard_init(&x->sh) < 0)
			return -ENOMEM;
	}
	srv.port = port;
	return 0;
}


/* Start the contexts, serve until the stop, and clean up: 0, or a negative
 * errno (reported on stderr). */
int server_run(void)
{
	co_sched_opts o = { .contexts = srv.threads, .engine = { .sq_entries = 1024 } };
	struct stopper st = { 0 };
	int err;

	srv.start_ms = now_ms();
	if ((err = co_event_init(&srv.all_closed, 0)) < 0 || (err = setup_contexts()) < 0 ||
	    (err = co_sched_init(&srv.s, &o)) < 0) {
		fprintf(stderr, "kv_server: start: %s\n", strerror(-err));
		return err;
	}
	for (unsigned i = 0; i < srv.threads; i++) {
		co_init(&srv.ctx[i].lis.co, listener_fn);
		co_init(&srv.ctx[i].sw.co, sweeper_fn);
		co_sched_spawn_to(&srv.s, i, &srv.ctx[i].lis.co);
		co_sched_spawn_to(&srv.s, i, &srv.ctx[i].sw.co);
	}
	co_init(&st.co, stopper_fn);
	co_sched_spawn_to(&srv.s, 0, &st.co);
	printf("port=%d\n", srv.port);
	fflush(stdout);
	fprintf(stderr, "kv_server: listening on %s:%d, %u thread(s)\n", srv.bind, srv.port,
		srv.threads);
	err = co_sched_run(&srv.s);
	co_sched_destroy(&srv.s);
	for (unsigned i = 0; i < srv.threads; i++) {
		close(srv.ctx[i].lis.lfd);
		shard_free(&srv.ctx[i].sh);
		pthread_mutex_destroy(&srv.ctx[i].lock);
	}
	free(srv.ctx);
	co_event_destroy(&srv.all_closed);
	if (err < 0)
		fprintf(stderr, "kv_server: %s\n", strerror(-err));
	return err;
}
