/* SPDX-License-Identifier: MIT */
/*
 * blocking.c - BLPOP, BRPOP and BLMOVE's wait. A connection that finds
 * every key empty waits on each of them: a node in a queue per key, kept
 * by the key's shard (shard.blocked), linked as the command visits the
 * key on its owner's context. A push on that shard serves the queue first
 * come, first served (serve_blocked): it claims the connection (an atomic
 * flag, as several shards may race for it), pops the element for it, and
 * sets its event. The connection waits on its event under coring's time
 * limit (co_timeout over co_event_wait); once the wait ends (served, the
 * time is up, or the stop) it claims itself, so that no shard serves it
 * any more, and visits each shard it waits on to take its nodes out. An
 * element it was given is then its answer: it is never popped without a
 * connection that answers it (the stop too lets the served answer).
 *
 * The wait is two children under co_when_any: the event within the time
 * limit, and a peek at the socket, so that a client that closes its
 * connection while it waits stops waiting at once (no element is popped
 * for it afterwards).
 */
#include <errno.h>
#include <math.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* A key's queue of waiting connections (the obj of its item in
 * shard.blocked). */
struct bqueue {
	struct bwait *head, *tail;
};

/* BLPOP's, BRPOP's, BLMOVE's timeout (argument i): seconds, a decimal,
 * taken in whole ms, rounded up, as Redis 7.0 takes it (0 waits for
 * ever; a time too large for a long long of ms is "negative" there, as it
 * wraps). Begins the wait's state. 0, or -1 after the error. */
int parse_timeout(struct conn *c, unsigned i)
{
	char buf[64], *end;
	long double t;
	long long ms;

	if (arg_n(c, i) == 0 || arg_n(c, i) >= sizeof buf || arg_p(c, i)[0] == ' ') {
		reply_error(c, "ERR timeout is not a float or out of range");
		return -1;
	}
	memcpy(buf, arg_p(c, i), arg_n(c, i));
	buf[arg_n(c, i)] = 0;
	t = strtold(buf, &end);
	if (end != buf + arg_n(c, i) || isnan(t)) {
		reply_error(c, "ERR timeout is not a float or out of range");
		return -1;
	}
	if (t < 0 || t * 1000 >= 9223372036854775808.0L) {
		reply_error(c, "ERR timeout is negative");
		return -1;
	}
	ms = (long long)ceill(t * 1000);
	if (ms > INT64_MAX - now_ms()) {
		reply_error(c, "ERR timeout is out of range");
		return -1;
	}
	if (c->bwcap < c->argc) { /* a node per key (nothing linked between waits) */
		free(c->bw);
		c->bwcap = 0;
		if ((c->bw = calloc(c->argc, sizeof *c->bw)) == NULL) {
			reply_oom(c);
			return -1;
		}
		c->bwcap = c->argc;
	}
	c->block_ns = ms > 0 ? (uint64_t)ms * CO_MS : 0;
	c->blocked = 1;
	c->answered = 0;
	c->served = 0;
	c->nbw = 0;
	atomic_store(&c->claimed, 0);
	co_event_reset(&c->wake);
	return 0;
}

/* 1 when the connection is the one to answer (nobody served it): from
 * now on nobody will. */
int block_claim(struct conn *c)
{
	int zero = 0;

	return atomic_compare_exchange_strong(&c->claimed, &zero, 1);
}

static void node_unlink(struct shard *sh, struct bwait *w)
{
	struct bqueue *q = w->q->obj;

	if (w->prev)
		w->prev->next = w->next;
	else
		q->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		q->tail = w->prev;
	if (q->head == NULL) { /* nobody waits on the key any more */
		free(q);
		w->q->obj = NULL;
		free(dict_take(&sh->blocked, dict_find(&sh->blocked, w->q->kv, w->q->klen,
						       w->q->hash)));
	}
	w->q = NULL;
	atomic_fetch_sub(&w->c->nlinked, 1);
}

/* Wait on key i (of shard sh): the connection's node goes last in the
 * key's queue. 0, or -1: it cannot wait (answered: the stop began, or no
 * memory). */
int block_on(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item **pq, *qi;
	struct bwait *w;
	struct bqueue *q;

	if (atomic_load(&srv.stopping)) {
		if (block_claim(c)) { /* (as a time limit that ran out) */
			out_add(c, "*-1\r\n", 5);
			c->answered = 1;
		}
		return -1;
	}
	pq = dict_find(&sh->blocked, arg_p(c, i), arg_n(c, i), h);
	if ((qi = *pq) == NULL) {
		if ((qi = item_new(arg_p(c, i), arg_n(c, i), NULL, 0)) == NULL ||
		    (qi->obj = calloc(1, sizeof(struct bqueue))) == NULL) {
			free(qi);
			if (block_claim(c)) {
				reply_oom(c);
				c->answered = 1;
			}
			return -1;
		}
		dict_put(&sh->blocked, pq, qi);
	}
	q = qi->obj;
	w = &c->bw[c->nbw++];
	*w = (struct bwait){ .prev = q->tail, .c = c, .q = qi, .arg = i };
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	atomic_fetch_add(&c->nlinked, 1);
	return 0;
}

/* A push to key's list (on shard sh): serve the connections waiting on
 * it, oldest first, one element each, while there are elements. The key
 * goes once its list is empty. */
void serve_blocked(struct shard *sh, struct item *key)
{
	struct item *qi = *dict_find(&sh->blocked, key->kv, key->klen, key->hash);
	struct list *l = key->obj;

	while (qi && qi->obj && l->len > 0) {
		struct bqueue *q = qi->obj;
		struct bwait *w = q->head;
		struct conn *c = w->c;
		int last = w->next == NULL;

		node_unlink(sh, w);
		if (block_claim(c)) {
			c->elem = list_pop(l, c->bend);
			c->served = w->arg;
			co_event_set(&c->wake);
		}
		if (last)
			break;
	}
	if (l->len == 0)
		db_delete(sh, db_slot(sh, key->kv, key->klen, key->hash));
}

/* ---- the wait ------------------------------------------------------------------------------ */

/* One side of the wait: the event (a serve, the stop) within the time
 * limit. */
static int served_fn(co_frame *f)
{
	struct waitkid *k = (struct waitkid *)f;

	CO_BEGIN(f);
	if (k->c->block_ns)
		CO_AWAIT(f, co_timeout(&k->lim, co_event_wait(&k->w, &k->c->wake), k->c->block_ns));
	else
		CO_AWAIT(f, co_event_wait(&k->w, &k->c->wake));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

/* The other: the client's end of the connection (a peek that reads 0),
 * noticed while it waits, as Redis notices it; bytes it sends meanwhile
 * (pipelined commands) wait for the answer, so this side waits on. */
static int peer_fn(co_frame *f)
{
	struct waitkid *k = (struct waitkid *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_recv(&k->io, k->c->fd, &k->byte, 1, MSG_PEEK));
	if (co_result(f) > 0)
		CO_AWAIT(f, co_event_wait(&k->w, &k->c->wake));
	CO_RETURN(f, -EPIPE);
	CO_END(f);
}

static struct conn *conn_of_bf(co_frame *f)
{
	return (struct conn *)(void *)((char *)f - offsetof(struct conn, bf));
}

/*
 * After the command visited its keys: wait (unless it was answered or
 * served already), claim the connection, take its nodes out of their
 * queues, each on its shard's context, and come home. Then the answer:
 * the element served (BLMOVE goes on to push it: c->ki), or a nil array
 * when the time ran out or the stop came first.
 */
static int block_fn(co_frame *f)
{
	struct conn *c = conn_of_bf(f);

	CO_BEGIN(f);
	if (atomic_load(&c->claimed) == 0) { /* served, timed out, or the client left */
		atomic_fetch_add(&srv.nblocked, 1);
		for (int k = 0; k < 2; k++) {
			co_init(&c->wk[k].co, k == 0 ? served_fn : peer_fn);
			c->wk[k].c = c;
			c->kids[k] = &c->wk[k].co;
		}
		CO_AWAIT(f, co_when_any(&c->when, c->kids, 2));
		atomic_fetch_sub(&srv.nblocked, 1);
	}
	block_claim(c); /* nobody serves it from now on */
	for (c->bi = 0; c->bi < c->nbw; c->bi++) {
		c->owner = owner_of(hash_key(arg_p(c, c->bw[c->bi].arg), arg_n(c, c->bw[c->bi].arg)));
		if (c->owner != c->where) {
			CO_AWAIT(f, co_transfer_to(&c->tr, &srv.s.ctx[c->owner]));
			if (co_result(f) < 0) { /* the cancel stop: its nodes stay (blocked_free) */
				c->orphan = 1;
				CO_RETURN(f, co_result(f));
			}
			c->where = c->owner;
		}
		if (c->bw[c->bi].q)
			node_unlink(&srv.ctx[c->where].sh, &c->bw[c->bi]);
	}
	if (c->where != c->home->idx) {
		CO_AWAIT(f, co_transfer_to(&c->tr, &srv.s.ctx[c->home->idx]));
		if (co_result(f) == 0)
			c->where = c->home->idx;
	}
	c->nbw = 0;
	if (c->served && c->cmd && arg_is(c, 0, "blmove")) {
		c->phase = 1; /* to the destination with it */
		c->ki = 2;
	} else if (c->served) {
		out_add(c, "*2\r\n", 4);
		reply_bulk(c, arg_p(c, c->served), arg_n(c, c->served));
		reply_bulk(c, c->elem->p, c->elem->n);
		free(c->elem);
		c->elem = NULL;
	} else if (!c->answered) {
		out_add(c, "*-1\r\n", 5);
	}
	CO_END(f);
}

co_frame *block_wait(struct conn *c)
{
	c->blocked = 0;
	co_init(&c->bf, block_fn);
	return &c->bf;
}

/* The stop: every connection of x that waits ends its wait. */
void block_wake_all(struct ctx *x)
{
	pthread_mutex_lock(&x->lock);
	for (struct conn *c = x->conns; c; c = c->next)
		co_event_set(&c->wake);
	pthread_mutex_unlock(&x->lock);
}

static void drop_queue(void *arg, struct item *qi)
{
	struct bqueue *q = qi->obj;

	(void)arg;
	while (q && q->head) {
		struct bwait *w = q->head;
		struct conn *c = w->c;

		q->head = w->next;
		w->q = NULL;
		if (atomic_fetch_sub(&c->nlinked, 1) == 1 && c->orphan == 2)
			conn_free(c); /* a connection the cancel stop ended while it waited */
	}
	free(q);
	qi->obj = NULL;
}

/* At the end (one thread left): the queues, and the connections that could
 * not take their nodes out. */
void blocked_free(struct shard *sh)
{
	uint64_t v = 0;

	do
		v = dict_scan(&sh->blocked, v, drop_queue, NULL);
	while (v != 0);
	dict_free(&sh->blocked);
}
