// SPDX-License-Identifier: MIT
// The C++20 baseline for bench/coroutine/switch.c: a minimal generator
// coroutine, resumed through its coroutine_handle (the frame allocation
// happens once).
#include <coroutine>
#include <exception>

namespace {
struct generator {
	struct promise_type {
		long value = 0;
		generator get_return_object() { return generator{handle::from_promise(*this)}; }
		std::suspend_always initial_suspend() noexcept { return {}; }
		std::suspend_always final_suspend() noexcept { return {}; }
		std::suspend_always yield_value(long v) noexcept { value = v; return {}; }
		void return_void() noexcept {}
		void unhandled_exception() { std::terminate(); }
	};
	using handle = std::coroutine_handle<promise_type>;
	handle h;
	explicit generator(handle h_) : h(h_) {}
	generator(const generator &) = delete;
	~generator() { if (h) h.destroy(); }
	bool next() { h.resume(); return !h.done(); }
	long value() const { return h.promise().value; }
};

generator count(long n)
{
	for (long i = 0; i < n; i++)
		co_yield i;
}
} // namespace

extern "C" long cpp_generator_sum(long iters);
extern "C" long cpp_generator_sum(long iters)
{
	generator g = count(iters);
	long sum = 0;
	while (g.next())
		sum += g.value();
	return sum;
}
