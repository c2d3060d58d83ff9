/* SPDX-License-Identifier: MIT */
/*
 * The intrusive lists the Linux layers share (not installed): a FIFO of
 * nodes linked through a pointer field, the unlink of a doubly-linked
 * list, and a lock-free stack that any thread pushes onto with one CAS
 * and one owner takes whole.
 */
#ifndef CORING_LIST_H
#define CORING_LIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

/* Append node to the FIFO (*headp, *tailp) linked through node->link. */
#define co__fifo_push(headp, tailp, node, link)                  \
	do {                                                     \
		(node)->link = NULL;                             \
		if (*(tailp))                                    \
			(*(tailp))->link = (node);               \
		else                                             \
			*(headp) = (node);                       \
		*(tailp) = (node);                               \
	} while (0)

/* Take node off the doubly-linked list (*headp, *tailp) whose nodes link
 * through ->next and ->prev; tailp is a null pointer of the list's type
 * for a list that keeps no tail. node's links are cleared. */
#define co__dlist_unlink(headp, tailp, node)                               \
	do {                                                               \
		if ((node)->prev)                                          \
			(node)->prev->next = (node)->next;                 \
		else                                                       \
			*(headp) = (node)->next;                           \
		if ((node)->next)                                          \
			(node)->next->prev = (node)->prev;                 \
		else if (tailp)                                            \
			*(tailp) = (node)->prev;                           \
		(node)->next = (node)->prev = NULL;                        \
	} while (0)

/*
 * The lock-free stack. Nodes link through a pointer at offset `link` of
 * whatever struct they are (memcpy: it is a co_frame * or a co_post *).
 */
static inline void *co__link_get(void *node, size_t link)
{
	void *p;

	memcpy(&p, (char *)node + link, sizeof p);
	return p;
}

static inline void co__link_set(void *node, size_t link, void *p)
{
	memcpy((char *)node + link, &p, sizeof p);
}

static inline void co__lifo_push(_Atomic(void *) *top, void *node, size_t link)
{
	void *head = atomic_load_explicit(top, memory_order_relaxed);

	do {
		co__link_set(node, link, head);
		/* release: what the pusher wrote is visible to the taker; pairs
		 * with the acquire exchange in co__lifo_take */
	} while (!atomic_compare_exchange_weak_explicit(top, &head, node, memory_order_release,
							memory_order_relaxed));
}

/* Push a chain of nodes already linked first -> ... -> last (newest
 * first, as the stack holds them) with one CAS. */
static inline void co__lifo_push_chain(_Atomic(void *) *top, void *first, void *last, size_t link)
{
	void *head = atomic_load_explicit(top, memory_order_relaxed);

	do {
		co__link_set(last, link, head);
		/* release: pairs with the acquire exchange in co__lifo_take */
	} while (!atomic_compare_exchange_weak_explicit(top, &head, first, memory_order_release,
							memory_order_relaxed));
}

/* Take the whole stack, oldest first: each pusher's nodes in its order. */
static inline void *co__lifo_take(_Atomic(void *) *top, size_t link)
{
	void *n = atomic_exchange_explicit(top, NULL, memory_order_acquire), *fifo = NULL;

	while (n) { /* the stack is newest first: reverse it */
		void *next = co__link_get(n, link);
		co__link_set(n, link, fifo);
		fifo = n;
		n = next;
	}
	return fifo;
}

static inline int co__lifo_empty(_Atomic(void *) *top)
{
	return atomic_load_explicit(top, memory_order_relaxed) == NULL;
}

#endif
