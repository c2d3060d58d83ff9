/* SPDX-License-Identifier: MIT */
/*
 * What the view's files share (not installed): names for code addresses
 * (lib/view/symbols.c), and the step that keeps one record per frame
 * (lib/view/view.c).
 */
#ifndef CORING_LIB_VIEW_INTERNAL_H
#define CORING_LIB_VIEW_INTERNAL_H

#include <stdint.h>

#include <coring/view.h>

/* A frame read on two contexts (it moved between the two reads) keeps
 * its first record; the others are removed, the order kept. 0, -ENOMEM. */
int co__view_drop_twice_seen(co_view *v);

/* A session maps each object file it needs once; the names it returns
 * live until co__symbols_fini. */

struct co__sym_object;

typedef struct co__symbols {
	struct co__sym_object **obj;
	unsigned n, cap;
} co__symbols;

typedef struct co__symbol {
	const char *name;       /* the function, or NULL */
	const char *file;       /* its source file (a static function's), or NULL */
	const char *object;     /* the program or library file that holds it */
	uintptr_t start;        /* the function's address */
	uintptr_t offset;       /* the address's offset in the object */
} co__symbol;

void co__symbols_init(co__symbols *s);
void co__symbols_fini(co__symbols *s);
/* What holds addr: 0 (out's fields may be NULL where unknown), or -1 (no
 * loaded object holds it, or no memory: out is all NULL). */
int co__symbols_find(co__symbols *s, uintptr_t addr, co__symbol *out);

#endif /* CORING_LIB_VIEW_INTERNAL_H */
