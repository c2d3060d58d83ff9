/* SPDX-License-Identifier: MIT */
/*
 * coring/net.h - the sockets a server and a client start with: a listening
 * TCP socket, and a connection to a host name (resolved on a co_pool, each
 * address tried in turn, under one time limit). docs/net.md has the
 * details.
 *
 *     int lfd = co_listen("127.0.0.1", 0, 0, CO_LISTEN_REUSEPORT);
 *     int port = co_local_port(lfd);
 *
 *     struct client { co_frame co; co_dialer d; int fd; ... };
 *     CO_AWAIT(f, co_dial(&c->d, &pool, "localhost", port, 2 * CO_S));
 *     if ((c->fd = co_result(f)) < 0) ...    // -ENOENT, -ECONNREFUSED, -ETIME ...
 *
 * Errors are negative errno values, as everywhere in coring.
 */
#ifndef CORING_NET_H
#define CORING_NET_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stdint.h>
#include <netdb.h>

#include <coring/io.h>
#include <coring/pool.h>
#include <coring/timeout.h>

#ifdef __cplusplus
extern "C" {
#endif

/* co_listen flags */
#define CO_LISTEN_REUSEPORT 1u  /* SO_REUSEPORT: several sockets share the
                                   port, the kernel spreads connections */
#define CO_LISTEN_NAGLE 2u      /* keep Nagle's algorithm (TCP_NODELAY is
                                   set otherwise) */

/*
 * A listening TCP socket on addr (a numeric IPv4 or IPv6 address:
 * "127.0.0.1", "0.0.0.0", "::1"; no name is looked up) and port (0: the
 * kernel picks one, see co_local_port), with SO_REUSEADDR, close-on-exec,
 * a backlog of backlog (0: SOMAXCONN), and TCP_NODELAY (Nagle's algorithm
 * off: a small write goes out at once), which the sockets it accepts
 * inherit; CO_LISTEN_NAGLE leaves Nagle on. Plain system calls: call it where
 * blocking for a moment is fine (they do not wait for the network).
 * Returns the descriptor, or -EINVAL (NULL or non-numeric addr, port
 * outside 0..65535, negative backlog, unknown flags), socket's and bind's
 * errors (-EADDRINUSE, -EACCES, -EADDRNOTAVAIL, -EMFILE ...).
 */
CO_API int co_listen(const char *addr, int port, int backlog, unsigned flags);

/* The local port of socket fd (what co_listen's port 0 became), or -errno:
 * -EBADF, -ENOTSOCK, -EAFNOSUPPORT (not an IPv4 or IPv6 socket). */
CO_API int co_local_port(int fd);

/* All fields are private unless marked. */
typedef struct co_dialer {
	co_frame co;                  /* first: awaited as a child */
	co_lookup dns;                /* dns.result read-only: a list a lookup a
	                                 cancel stop gave up left (see co_dial) */
	co_io io;
	co_limit lim;                 /* the lookup's time limit */
	struct addrinfo hints;
	struct addrinfo *list, *ai;   /* the addresses; the one being tried */
	co_pool *pool;
	const char *host;
	char service[8];
	uint64_t deadline;            /* 0: none */
	int fd;
	int err;                      /* read-only: the last address's error */
	unsigned tried;               /* read-only: addresses tried */
} co_dialer;

/*
 * Connect a TCP socket to host:port, with TCP_NODELAY (Nagle off; turn it
 * back on with setsockopt if wanted): a child coroutine to await (C11
 * CO_AWAIT; CO_AWAIT_TASK in C99). host is a numeric address (used as is,
 * p may be NULL) or a name, resolved with co_getaddrinfo on p; each
 * address is then tried in turn (co_connect), until one connects. The
 * whole of it, lookup and connects, is limited to timeout_ns (0: no limit
 * but the kernel's). host must stay valid during the await.
 *
 * The value: the connected descriptor (close-on-exec; the caller closes
 * it), or -ENOENT (the name does not resolve, or resolves to no address),
 * -EAGAIN (the lookup failed for now), the last address's connect error
 * (-ECONNREFUSED, -ENETUNREACH ...; d->err, d->tried tell more), -ETIME
 * (the time ran out: a lookup still queued on the pool is taken off it, one
 * a worker runs already is waited for), -ECANCELED, -EINVAL (NULL host,
 * port outside 1..65535, a name with NULL p), -EBUSY (a dial is in
 * progress on d: from the call that handed out its frame, awaited or not
 * yet, until that frame finishes; zeroing d drops one never awaited). A
 * NULL d returns NULL (-EINVAL). co_timeout and
 * co_cancel apply as to any child. d must be zeroed memory before its
 * first use (a field of a zeroed struct), as a co_stream. A cancel stop
 * whose grace runs out while a worker runs the lookup finishes the dial
 * with -ECANCELED and the lookup goes on (coring/pool.h): d and host must
 * then stay valid until co_pool_destroy succeeds, and the caller frees the
 * list the lookup left in d->dns.result (freeaddrinfo).
 */
CO_API co_frame *co_dial(co_dialer *d, co_pool *p, const char *host, int port,
			 uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* CORING_NET_H */
