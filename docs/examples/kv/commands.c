/* SPDX-License-Identifier: MIT */
/*
 * commands.c - the command table and how a command runs: looked up by
 * name, its arity checked, begun at the connection's home; then server.c
 * visits its keys, each on the context that owns it (command_key,
 * command_run_key), and command_finish ends it back home.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static void unknown_command(struct conn *c)
{
	char args[160];
	size_t n = 0;

	args[0] = 0;
	for (unsigned i = 1; i < c->argc && n < 128; i++) {
		int w = snprintf(args + n, sizeof args - n, "'%.*s' ",
				 (int)(arg_n(c, i) < 128 - n ? arg_n(c, i) : 128 - n), arg_p(c, i));

		if (w < 0 || (size_t)w >= sizeof args - n)
			break;
		n += (size_t)w;
	}
	reply_error(c, "ERR unknown command '%.*s', with args beginning with: %s",
		    arg_n(c, 0) < 128 ? (int)arg_n(c, 0) : 128, arg_p(c, 0), args);
}

static const struct command *const families[] = {
	string_commands, list_commands, set_commands, keyspace_commands, expiry_commands,
	server_commands,
};

/* Look the command up and begin it: 1 when it has keys to visit. */
int command_start(struct conn *c)
{
	const struct command *cmd = NULL;

	c->cmd = NULL;
	for (size_t f = 0; cmd == NULL && f < sizeof families / sizeof families[0]; f++)
		for (const struct command *t = families[f]; t->name && cmd == NULL; t++)
			if (arg_n(c, 0) > 0 && (arg_p(c, 0)[0] | 0x20) == t->name[0] &&
			    arg_is(c, 0, t->name))
				cmd = t;
	if (cmd == NULL) {
		unknown_command(c);
		return 0;
	}
	if ((cmd->arity > 0 && c->argc != (unsigned)cmd->arity) ||
	    (cmd->arity < 0 && c->argc < (unsigned)-cmd->arity)) {
		reply_error(c, "ERR wrong number of arguments for '%s' command", cmd->name);
		return 0;
	}
	c->cmd = cmd;
	c->ki = (unsigned)cmd->first;
	c->phase = 0;
	if (cmd->begin && cmd->begin(c)) {
		c->cmd = NULL; /* answered */
		return 0;
	}
	return c->ki != 0;
}

/* The command's next stop (0: none left) and the context it runs on;
 * c->h is the hash of its key. */
unsigned command_next(struct conn *c, unsigned *owner)
{
	if (c->cmd == NULL || c->ki == 0)
		return 0;
	if (c->cmd->flags & CMD_ALL_SHARDS) {
		if (c->ki > srv.threads)
			return 0;
		*owner = c->ki - 1;
		return c->ki;
	}
	if (c->ki >= c->argc)
		return 0;
	c->h = hash_key(arg_p(c, c->ki), arg_n(c, c->ki));
	*owner = owner_of(c->h);
	return c->ki;
}

/* Run the key part of stop i on this context's shard; the next stop is
 * the next key (or shard), unless the part chooses another. */
void command_run_key(struct conn *c, unsigned i)
{
	const struct command *cmd = c->cmd;
	int last = cmd->flags & CMD_ALL_SHARDS ? (int)srv.threads
		 : cmd->last < 0 ? (int)c->argc + cmd->last : cmd->last;

	c->ki = (int)i + cmd->step <= last ? i + (unsigned)cmd->step : 0;
	cmd->key(c, &srv.ctx[c->where].sh, i, c->h);
}

void command_finish(struct conn *c)
{
	if (c->cmd && c->cmd->end)
		c->cmd->end(c);
	c->cmd = NULL;
	c->argc = 0;
	c->alen = 0;
	if (c->held) /* (a command cut short by the stop) */
		item_free(c->held);
	c->held = NULL;
	free(c->elem);
	c->elem = NULL;
}

/* ---- helpers of the commands -------------------------------------------------------------- */

void reply_wrongtype(struct conn *c)
{
	reply_error(c, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

void reply_syntax(struct conn *c)
{
	reply_error(c, "ERR syntax error");
}

void reply_not_int(struct conn *c)
{
	reply_error(c, "ERR value is not an integer or out of range");
}

void reply_oom(struct conn *c)
{
	reply_error(c, "ERR out of memory");
}

/* Key i if it holds a value of the type (NULL: no such key); another type
 * answers WRONGTYPE and sets *wrong. */
struct item *lookup_typed(struct conn *c, struct shard *sh, unsigned i, uint64_t h, int type,
			  int *wrong)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);

	*wrong = e && e->type != type;
	if (*wrong) {
		reply_wrongtype(c);
		return NULL;
	}
	return e;
}

/* LPOP's, SPOP's, ZPOPMIN's optional count (argument 2): c->num, -1
 * without one. 0, or -1 after the error. */
int arg_count(struct conn *c)
{
	c->num = -1;
	if (c->argc == 3 && (!arg_ll(c, 2, &c->num) || c->num < 0)) {
		reply_error(c, "ERR value is out of range, must be positive");
		return -1;
	}
	return 0;
}

/* A start and a stop (arguments 2 and 3: c->num, c->num2), as GETRANGE,
 * LRANGE, LTRIM, ZRANGE take them. 0, or 1 after the error. */
int range_begin(struct conn *c)
{
	if (!arg_ll(c, 2, &c->num) || !arg_ll(c, 3, &c->num2)) {
		reply_not_int(c);
		return 1;
	}
	return 0;
}

/* Redis's range of [start, stop] over len elements (negative: from the
 * end; clamped): 0 when it is empty. */
int clamp_range(long long len, long long *start, long long *stop)
{
	if (*start < 0)
		*start += len;
	if (*stop < 0)
		*stop += len;
	if (*start < 0)
		*start = 0;
	if (*start > *stop || *start >= len)
		return 0;
	if (*stop >= len)
		*stop = len - 1;
	return 1;
}

/* An array whose length is known at its end: its elements go to out
 * first, array_end puts "*N" before them. */
void array_begin(struct conn *c)
{
	c->mark = c->olen;
}

/* Put p[0, n) at offset at of the answers, before what is there. */
void out_insert(struct conn *c, size_t at, const char *p, size_t n)
{
	if (out_room(c, n) == NULL)
		return;
	memmove(c->out + at + n, c->out + at, c->olen - at);
	memcpy(c->out + at, p, n);
	c->olen += n;
}

void array_end(struct conn *c, long long n)
{
	char head[24];
	size_t len;

	head[0] = '*';
	len = 1 + fmt_ll(head + 1, n);
	head[len++] = '\r';
	head[len++] = '\n';
	out_insert(c, c->mark, head, len);
}

/*
 * Glob-style matching as KEYS and SCAN's MATCH take it: *, ?, [set],
 * [^set], [a-z], and \ to quote. 1: a match; 0: none; -1: none, nor can
 * there be one if this part starts further on in the string. A '*' whose
 * rest matches from none of the places after it answers -1: what comes
 * before it cannot help by taking more of the string, since the rest
 * would then start further on still, so the earlier '*'s stop trying
 * (as Redis's matcher does; without it "a*a*a*...b" over a long "aaa..."
 * key tries an exponential number of splits).
 */
static int glob(const char *p, size_t pn, const char *s, size_t sn, int nocase)
{
	while (pn > 0) {
		switch (p[0]) {
		case '*':
			while (pn > 1 && p[1] == '*')
				p++, pn--;
			if (pn == 1)
				return 1;
			for (size_t k = 0; k <= sn; k++) {
				int r = glob(p + 1, pn - 1, s + k, sn - k, nocase);

				if (r != 0)
					return r;
			}
			return -1;
		case '?':
			if (sn == 0)
				return 0;
			s++, sn--;
			break;
		case '[': {
			int not, match = 0;

			p++, pn--;
			not = pn > 0 && p[0] == '^';
			if (not)
				p++, pn--;
			while (pn > 0 && p[0] != ']') {
				if (p[0] == '\\' && pn >= 2) {
					p++, pn--;
					match |= sn > 0 && p[0] == s[0];
				} else if (pn >= 3 && p[1] == '-') {
					unsigned char lo = (unsigned char)p[0], hi = (unsigned char)p[2], ch;

					if (lo > hi) {
						unsigned char t = lo;

						lo = hi;
						hi = t;
					}
					ch = sn > 0 ? (unsigned char)s[0] : 0;
					match |= sn > 0 && ch >= lo && ch <= hi;
					p += 2, pn -= 2;
				} else {
					match |= sn > 0 && p[0] == s[0];
				}
				p++, pn--;
			}
			if (pn == 0) { /* no closing bracket: as Redis, the '[' ends the pattern */
				p--, pn++;
			}
			if (not)
				match = !match;
			if (!match || sn == 0)
				return 0;
			s++, sn--;
			break;
		}
		default:
			if (p[0] == '\\' && pn >= 2) /* a quoted character */
				p++, pn--;
			if (sn == 0 || (nocase ? (p[0] | 0x20) != (s[0] | 0x20) : p[0] != s[0]))
				return 0;
			s++, sn--;
			break;
		}
		p++, pn--;
	}
	return sn == 0;
}

int glob_match(const char *p, size_t pn, const char *s, size_t sn, int nocase)
{
	return glob(p, pn, s, sn, nocase) > 0;
}

/* Whether what strtod or strtold just read is a number as Redis takes
 * one: past the type's range (ERANGE, an infinity) or so small that it
 * became 0 (ERANGE, 0) it is not; a subnormal one (ERANGE too) is. */
int float_in_range(long double v)
{
	return errno != ERANGE || (!isinf(v) && v != 0);
}

/* A double as Redis reads one (ZADD's scores): the whole argument, of any
 * length, no space first, not NaN, in range; "inf" and "-inf" are. 1 if it
 * is one, 0 if not, -1 no memory (a long one is copied to the heap). */
int arg_double(const struct conn *c, unsigned i, double *out)
{
	char buf[64], *s = buf, *end;
	size_t n = arg_n(c, i);
	int ok;

	if (n == 0 || isspace((unsigned char)arg_p(c, i)[0]))
		return 0;
	if (n >= sizeof buf && (s = malloc(n + 1)) == NULL)
		return -1;
	memcpy(s, arg_p(c, i), n);
	s[n] = 0;
	errno = 0;
	*out = strtod(s, &end);
	ok = end == s + n && !isnan(*out) && float_in_range(*out);
	if (s != buf)
		free(s);
	return ok;
}

/* A double as Redis 7.0 answers one: an integer as such, else 17 digits. */
size_t fmt_double(char *p, double v)
{
	if (isinf(v))
		return (size_t)sprintf(p, v > 0 ? "inf" : "-inf");
	if (v == (double)(long long)v && v > -1e17 && v < 1e17)
		return fmt_ll(p, (long long)v);
	return (size_t)sprintf(p, "%.17g", v);
}
