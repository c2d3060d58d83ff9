/* SPDX-License-Identifier: MIT */
/*
 * Listening sockets and connections by host name (coring/net.h,
 * docs/net.md). co_listen is plain system calls; co_dial is a child
 * coroutine: the lookup on the pool (or a numeric address parsed at once),
 * then one co_connect per address, each under the one deadline (a kernel
 * timeout linked to the connect; a timer for the lookup, see timeout.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <coring/net.h>

static const co_frame fail_einval = { .state = CO__ST_DONE, .status = -EINVAL };
static const co_frame fail_ebusy = { .state = CO__ST_DONE, .status = -EBUSY };

/* getaddrinfo's answer for a numeric host (AI_NUMERICHOST): 0, -EAGAIN
 * when the host is not numeric (a name), -ENOMEM, or -EINVAL. */
static int numeric_errno(int eai)
{
	return eai == 0 ? 0 : eai == EAI_NONAME ? -EAGAIN : eai == EAI_MEMORY ? -ENOMEM : -EINVAL;
}

/* ---- listening ------------------------------------------------------------------ */

/* Nagle's algorithm off: a small write goes out at once, not after the
 * peer's delayed ACK (an answer written in two sends would wait for it).
 * Set on a listening socket, it is inherited by the sockets it accepts. */
static int no_delay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int bound_socket(const struct addrinfo *ai, int backlog, unsigned flags)
{
	int one = 1, fd, err;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    ((flags & CO_LISTEN_REUSEPORT) &&
	     setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
	    (!(flags & CO_LISTEN_NAGLE) && no_delay(fd) < 0) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(fd, backlog ? backlog : SOMAXCONN) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int co_listen(const char *addr, int port, int backlog, unsigned flags)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	char service[8];
	int fd, err;

	if (addr == NULL || port < 0 || port > 65535 || backlog < 0 ||
	    (flags & ~(CO_LISTEN_REUSEPORT | CO_LISTEN_NAGLE)))
		return -EINVAL;
	snprintf(service, sizeof service, "%d", port);
	if ((err = numeric_errno(getaddrinfo(addr, service, &hints, &ai))) != 0)
		return err == -EAGAIN ? -EINVAL : err; /* -EAGAIN: not a numeric address */
	fd = bound_socket(ai, backlog, flags);
	freeaddrinfo(ai);
	return fd;
}

int co_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -EAFNOSUPPORT;
}

/* ---- connecting ------------------------------------------------------------------- */

/* aw under the dialer's deadline, if it has one. */
static co_awaiter *limited(co_dialer *d, co_awaiter *aw)
{
	return d->deadline ? co_timeout_at(&d->lim, aw, d->deadline) : aw;
}

/* A numeric host needs no lookup: its address now, or -EAGAIN (a name). */
static int dial_numeric(co_dialer *d)
{
	struct addrinfo hints = d->hints;

	hints.ai_flags |= AI_NUMERICHOST;
	return numeric_errno(getaddrinfo(d->host, d->service, &hints, &d->list));
}

/* The time is up (a lookup a worker had begun may end after it): no
 * connect is tried any more. */
static int dial_late(co_dialer *d)
{
	if (d->deadline == 0 || co_now_ns() < d->deadline)
		return 0;
	d->err = -ETIME;
	return 1;
}

/* Open a socket for the next address to try (d->ai, the first one when
 * d->ai is NULL), Nagle off: 1, or 0 when none is left. */
static int dial_next(co_dialer *d)
{
	for (;;) {
		d->ai = d->ai ? d->ai->ai_next : d->list;
		if (d->ai == NULL)
			return 0;
		d->tried++;
		d->fd = socket(d->ai->ai_family, d->ai->ai_socktype | SOCK_CLOEXEC,
			       d->ai->ai_protocol);
		if (d->fd >= 0 && no_delay(d->fd) == 0)
			return 1;
		d->err = -errno;
		if (d->fd >= 0)
			close(d->fd);
		d->fd = -1;
	}
}

/* The lookup, then each address in turn. */
static int dial_fn(co_frame *f)
{
	co_dialer *d = (co_dialer *)f;

	CO_BEGIN(f);
	d->err = dial_numeric(d);
	if (d->err == -EAGAIN) { /* a name: look it up on the pool */
		if (d->pool == NULL)
			CO_RETURN(f, -EINVAL);
		CO_AWAIT(f, limited(d, co_getaddrinfo(&d->dns, d->pool, d->host, d->service,
						      &d->hints)));
		d->err = co_result(f);
		d->list = d->err == 0 ? d->dns.result : NULL;
	}
	if (d->err < 0)
		CO_RETURN(f, d->err);
	d->err = -ENOENT; /* (no address at all) */
	while (!dial_late(d) && dial_next(d)) {
		CO_AWAIT(f, limited(d, co_connect(&d->io, d->fd, d->ai->ai_addr, d->ai->ai_addrlen)));
		if (co_result(f) == 0)
			break;
		d->err = co_result(f);
		close(d->fd);
		d->fd = -1;
		if (d->err == -ECANCELED)
			break; /* the caller gave up (or a co_timeout ran out): no next address */
	}
	freeaddrinfo(d->list);
	d->list = d->ai = NULL;
	CO_RETURN(f, d->fd >= 0 ? d->fd : d->err);
	CO_END(f);
}

/* A dial is in progress on d: from the call that handed out its frame
 * until that frame finishes (awaited, started, or not awaited yet). Zeroed
 * memory has no body: no dial. */
static int dial_busy(const co_dialer *d)
{
	return d->co.parent != NULL || (d->co.fn != NULL && !(d->co.state & CO__ST_DONE));
}

co_frame *co_dial(co_dialer *d, co_pool *p, const char *host, int port, uint64_t timeout_ns)
{
	uint64_t now;

	if (d == NULL)
		return NULL;
	if (dial_busy(d))
		return (co_frame *)&fail_ebusy; /* another await's */
	if (host == NULL || port < 1 || port > 65535)
		return (co_frame *)&fail_einval;
	memset(d, 0, sizeof *d);
	co_init(&d->co, dial_fn);
	d->pool = p;
	d->host = host;
	d->fd = -1;
	snprintf(d->service, sizeof d->service, "%d", port);
	d->hints.ai_socktype = SOCK_STREAM;
	d->hints.ai_flags = AI_NUMERICSERV;
	if (timeout_ns) {
		now = co_now_ns();
		d->deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
	}
	return &d->co;
}
