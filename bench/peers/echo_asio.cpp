// SPDX-License-Identifier: MIT
//
// A peer of the echo benchmark on Boost.Asio with its stackless coroutines:
// echo_asio --port P [--threads N]
//
// Written the way Asio's documentation shows them: a class derived from
// boost::asio::coroutine whose operator() is the coroutine body, reenter /
// yield (boost/asio/yield.hpp: a switch, like coring's CO_BEGIN/CO_AWAIT),
// each yield starting one asynchronous operation whose completion handler
// calls operator() again. The closest model to coring's in any widespread
// C++ library. One io_context per thread (concurrency hint 1: one thread
// runs it), each with its own acceptor (SO_REUSEPORT) and a signal_set.
//
// Where it departs from the documentation's example, it is to be as good
// as our own servers: the session owns its socket and one 16 KiB buffer
// and is resumed through a handler holding its address (the example
// copies the coroutine, with shared_ptrs to the socket and buffer, into
// every handler: two atomic reference counts per operation).
//
// Same address, backlog (4096), TCP_NODELAY and buffer size as the other
// servers (bench_util.h, which is C). SIGINT/SIGTERM: every io_context
// stops, exit 0.
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/coroutine.hpp>

namespace asio = boost::asio;
using asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

constexpr std::size_t buf_size = 16384; // BENCH_BUF_SIZE of bench_util.h

// SO_REUSEPORT as a SettableSocketOption (Asio names only SO_REUSEADDR).
struct reuse_port {
	int value = 1;
	template <class P> int level(const P &) const { return SOL_SOCKET; }
	template <class P> int name(const P &) const { return SO_REUSEPORT; }
	template <class P> const int *data(const P &) const { return &value; }
	template <class P> std::size_t size(const P &) const { return sizeof value; }
};

#include <boost/asio/yield.hpp>

// One connection: read what is there, write it all back, again.
class session : asio::coroutine {
public:
	explicit session(tcp::socket s) : sock_(std::move(s)) {}

	// The completion handler of every operation: resume this session.
	auto resume()
	{
		return [this](error_code ec, std::size_t n) { (*this)(ec, n); };
	}

	void operator()(error_code ec = {}, std::size_t n = 0)
	{
		reenter (this) {
			for (;;) {
				yield sock_.async_read_some(asio::buffer(buf_), resume());
				if (ec)
					break;
				yield asio::async_write(sock_, asio::buffer(buf_, n), resume());
				if (ec)
					break;
			}
		}
		if (is_complete())
			delete this; // closes the socket
	}

private:
	tcp::socket sock_;
	char buf_[buf_size];
};

// One thread's acceptor: accept, start a session, again.
class listener : asio::coroutine {
public:
	listener(asio::io_context &io, unsigned short &port)
		: acc_(io), peer_(io), backoff_(io)
	{
		tcp::endpoint at(asio::ip::make_address_v4("127.0.0.1"), port);
		acc_.open(at.protocol());
		acc_.set_option(tcp::acceptor::reuse_address(true));
		acc_.set_option(reuse_port());
		acc_.bind(at);
		acc_.listen(4096);
		port = acc_.local_endpoint().port(); // 0: the next thread joins it
	}

	void operator()(error_code ec = {})
	{
		reenter (this) {
			for (;;) {
				yield acc_.async_accept(peer_, [this](error_code e) { (*this)(e); });
				if (ec == asio::error::operation_aborted)
					break;
				if (ec) { // EMFILE and friends: back off, keep serving
					backoff_.expires_after(std::chrono::milliseconds(10));
					yield backoff_.async_wait([this](error_code e) { (*this)(e); });
					continue;
				}
				peer_.set_option(tcp::no_delay(true), ec);
				(*new session(std::move(peer_)))();
			}
		}
	}

private:
	tcp::acceptor acc_;
	tcp::socket peer_;
	asio::steady_timer backoff_;
};

#include <boost/asio/unyield.hpp>

[[noreturn]] void usage(const char *prog)
{
	std::fprintf(stderr, "usage: %s --port P [--threads N]\n", prog);
	std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
	long port = -1, threads = 1;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage(argv[0]);
		if (!std::strcmp(argv[i], "--port"))
			port = std::atol(argv[++i]);
		else if (!std::strcmp(argv[i], "--threads"))
			threads = std::atol(argv[++i]);
		else
			usage(argv[0]);
	}
	if (port < 0 || port > 65535 || threads < 1 || threads > 256)
		usage(argv[0]);

	unsigned short p = static_cast<unsigned short>(port);
	std::vector<std::unique_ptr<asio::io_context>> ios;
	std::vector<std::unique_ptr<listener>> ls;
	std::vector<std::unique_ptr<asio::signal_set>> sigs;
	try {
		for (long i = 0; i < threads; i++) {
			auto &io = *ios.emplace_back(std::make_unique<asio::io_context>(1));
			(*ls.emplace_back(std::make_unique<listener>(io, p)))();
			auto &s = *sigs.emplace_back(std::make_unique<asio::signal_set>(io, SIGINT, SIGTERM));
			s.async_wait([&io](error_code, int) { io.stop(); });
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "echo_asio: listen: %s\n", e.what());
		return 1;
	}
	std::printf("port=%u\n", p);
	std::fflush(stdout);
	std::fprintf(stderr, "echo_asio: listening on 127.0.0.1:%u, %ld thread(s)\n", p, threads);

	std::vector<std::thread> ts;
	for (auto &io : ios)
		ts.emplace_back([&io] { io->run(); });
	for (auto &t : ts)
		t.join();
	// Sessions still open are left to exit, as in the other servers: the
	// io_contexts' destruction destroys their pending handlers only.
	return 0;
}
