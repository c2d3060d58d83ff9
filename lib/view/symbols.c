/* SPDX-License-Identifier: MIT */
/*
 * Names for code addresses, for a view of the coroutines (lib/view/view.c):
 * the function that holds an address and, for a static function, the
 * source file it came from. Read from the ELF symbol table (.symtab) of
 * the program or library that holds the address, which names static
 * functions too (the dynamic table has only exported ones); a local
 * symbol's file is the STT_FILE entry before it. Each object file is
 * mapped once per lookup session and every offset read from it is checked
 * against its size: a truncated or odd file gives no name, never a crash.
 * A stripped object falls back to dladdr, then to the object's name and
 * the address's offset in it.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "view_internal.h"

struct co__sym_object {
	uintptr_t bias;               /* load address - link address */
	uintptr_t lo, hi;             /* its loaded range (PT_LOAD segments) */
	char path[256];
	const unsigned char *map;     /* the file, or NULL (unreadable) */
	size_t size;
	const ElfW(Sym) *syms;        /* .symtab, checked against size */
	size_t nsyms;
	const char *strs;             /* its string table */
	size_t strs_size;
};

void co__symbols_init(co__symbols *s)
{
	memset(s, 0, sizeof *s);
}

void co__symbols_fini(co__symbols *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		if (s->obj[i]->map)
			munmap((void *)(uintptr_t)s->obj[i]->map, s->obj[i]->size);
		free(s->obj[i]);
	}
	free(s->obj);
	memset(s, 0, sizeof *s);
}

/* Find .symtab and its strings in the mapped file (everything checked). */
static void find_symtab(struct co__sym_object *o)
{
	const ElfW(Ehdr) *eh = (const void *)o->map;
	const ElfW(Shdr) *sh;

	if (o->size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh->e_shentsize != sizeof *sh || eh->e_shoff == 0 || eh->e_shoff >= o->size ||
	    eh->e_shnum > (o->size - eh->e_shoff) / sizeof *sh)
		return;
	sh = (const void *)(o->map + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const ElfW(Shdr) *str;

		if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
			continue;
		str = &sh[sh[i].sh_link];
		if (sh[i].sh_offset > o->size || sh[i].sh_size > o->size - sh[i].sh_offset ||
		    str->sh_offset > o->size || str->sh_size > o->size - str->sh_offset ||
		    str->sh_size == 0)
			return;
		o->syms = (const void *)(o->map + sh[i].sh_offset);
		o->nsyms = sh[i].sh_size / sizeof(ElfW(Sym));
		o->strs = (const char *)(o->map + str->sh_offset);
		o->strs_size = str->sh_size;
		return;
	}
}

static void object_open(struct co__sym_object *o)
{
	struct stat st;
	int fd = open(o->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);

		if (m != MAP_FAILED) {
			o->map = m;
			o->size = (size_t)st.st_size;
			find_symtab(o);
		}
	}
	close(fd);
}

struct find_arg {
	uintptr_t addr;
	struct co__sym_object *o;
};

/* dl_iterate_phdr: the object whose loaded segments hold addr. */
static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_arg *fa = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (fa->addr < lo || fa->addr >= hi)
		return 0;
	fa->o->bias = info->dlpi_addr;
	fa->o->lo = lo;
	fa->o->hi = hi;
	/* the program itself has no name here */
	snprintf(fa->o->path, sizeof fa->o->path, "%s",
		 info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe");
	return 1;
}

/* The object that holds addr: one already open, or found and opened now;
 * NULL if none (or no memory). */
static struct co__sym_object *object_of(co__symbols *s, uintptr_t addr)
{
	struct co__sym_object *o, **grown;
	struct find_arg fa;

	for (unsigned i = 0; i < s->n; i++)
		if (addr >= s->obj[i]->lo && addr < s->obj[i]->hi)
			return s->obj[i];
	if (s->n == s->cap) {
		unsigned cap = s->cap ? 2 * s->cap : 4;

		grown = realloc(s->obj, cap * sizeof *grown);
		if (grown == NULL)
			return NULL;
		s->obj = grown;
		s->cap = cap;
	}
	o = calloc(1, sizeof *o);
	if (o == NULL)
		return NULL;
	fa.addr = addr;
	fa.o = o;
	if (!dl_iterate_phdr(find_object, &fa)) {
		free(o);
		return NULL;
	}
	object_open(o);
	s->obj[s->n++] = o;
	return o;
}

static const char *sym_str(const struct co__sym_object *o, unsigned off)
{
	if (off >= o->strs_size || memchr(o->strs + off, 0, o->strs_size - off) == NULL)
		return NULL;
	return o->strs + off;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

int co__symbols_find(co__symbols *s, uintptr_t addr, co__symbol *out)
{
	struct co__sym_object *o = object_of(s, addr);
	const char *file = NULL;
	Dl_info di;
	const ElfW(Sym) *ds = NULL;

	memset(out, 0, sizeof *out);
	if (o == NULL)
		return -1;
	out->object = base_name(o->path);
	out->offset = addr - o->bias;
	for (size_t i = 0; i < o->nsyms; i++) {
		const ElfW(Sym) *sym = &o->syms[i];
		uintptr_t a = addr - o->bias;

		if (ELF64_ST_TYPE(sym->st_info) == STT_FILE) {
			file = sym_str(o, sym->st_name);
			continue;
		}
		if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || sym->st_value == 0 ||
		    a < sym->st_value || a - sym->st_value >= (sym->st_size ? sym->st_size : 1))
			continue;
		out->name = sym_str(o, sym->st_name);
		if (out->name == NULL)
			continue;
		out->start = o->bias + sym->st_value;
		out->file = ELF64_ST_BIND(sym->st_info) == STB_LOCAL ? file : NULL;
		return 0;
	}
	/* no symbol table: the dynamic one, if its symbol holds the address */
	if (dladdr1((void *)addr, &di, (void **)&ds, RTLD_DL_SYMENT) && di.dli_sname && ds &&
	    addr - (uintptr_t)di.dli_saddr < (ds->st_size ? ds->st_size : 1)) {
		out->name = di.dli_sname;
		out->start = (uintptr_t)di.dli_saddr;
		return 0;
	}
	return 0;
}
