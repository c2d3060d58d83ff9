// SPDX-License-Identifier: MIT
// Every public header compiles as C++ (g++ -std=c++17 -Wall -Wextra
// -Werror) and links: a C++ program can embed the structs and call the API.
#include <coring/coring.h>

#include <cerrno>
#include <cstdio>

struct kid {
	co_frame co;
};

static int kid_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_YIELD(f);
	CO_RETURN(f, 5);
	CO_END(f);
}

struct task {
	co_frame co;
	co_io io;
	kid k;
	int res, kid_res;
};

static int task_fn(co_frame *f)
{
	task *t = reinterpret_cast<task *>(f);
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&t->io)); // an awaiter
	t->res = co_result(f);
	co_init(&t->k.co, kid_fn);
	CO_AWAIT(f, &t->k.co); // a child: C++ overloads pick it
	t->kid_res = co_result(f);
	CO_END(f);
}

struct tiny {
	co_tiny pt;
	int n;
};

static int tiny_fn(tiny *t)
{
	co_tiny *f = &t->pt;
	CO_BEGIN(f);
	for (t->n = 0; t->n < 2; t->n++)
		CO_YIELD(f);
	CO_END(f);
}

int main()
{
	co_engine e;
	task t = {};
	co_mutex m = CO_MUTEX_INIT;

	if (co_version() != CORING_VERSION || co_engine_init(&e, nullptr) != 0)
		return 1;
	co_init(&t.co, task_fn);
	t.res = -1;
	if (co_engine_spawn(&e, &t.co) != 0 || co_engine_run(&e, CO_RUN_UNTIL_IDLE) != 0 ||
	    co_engine_destroy(&e) != 0 || t.res != 0 || t.kid_res != 5 ||
	    co_mutex_trylock(&m) != 0)
		return 1;
	tiny ty;
	co_tiny_init(&ty.pt);
	while (tiny_fn(&ty) == CO_YIELDED)
		;
	if (!co_tiny_done(&ty.pt) || ty.n != 2)
		return 1;
	std::printf("C++: ok\n");
	return 0;
}
