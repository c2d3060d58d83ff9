// SPDX-License-Identifier: MIT

// A peer of the echo benchmark on Go's net package:
//
//	echo_go --port P [--threads N]
//
// Written the way the net package's documentation shows a server: a
// Listener from net.Listen, an Accept loop, a goroutine per connection
// that reads and writes back until EOF or an error, then closes. What it
// adds to the documentation's example (io.Copy(c, c)) keeps it to the
// work the other servers do, not more: each connection reads into one
// buffer of 16 KiB (the other servers' size, bench/server/bench_util.h)
// and writes back what it read; io.Copy between two TCP connections
// would splice through a pipe instead.
//
// --threads N is GOMAXPROCS (default 1): N threads run goroutines; Go's
// network poller is shared by them, so one listener serves all (the
// other servers open one SO_REUSEPORT listener per thread). Go sets
// TCP_NODELAY on every connection itself, like the others; the listen
// backlog is the kernel's somaxconn (Go's choice). 127.0.0.1, "port=P" on
// stdout once listening (--port 0: a free port), SIGINT/SIGTERM: exit 0.
// bench/runner/run.py builds it with go build (offline, standard library
// only) where go is installed.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16384)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a real error: the connection is done
			return
		}
	}
}

func main() {
	port := flag.Int("port", -1, "port to listen on (0: a free one)")
	threads := flag.Int("threads", 1, "GOMAXPROCS")
	flag.Parse()
	if flag.NArg() != 0 || *port < 0 || *port > 65535 || *threads < 1 || *threads > 256 {
		fmt.Fprintln(os.Stderr, "usage: echo_go --port P [--threads N]")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*threads)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo_go: listen:", err)
		os.Exit(1)
	}
	fmt.Printf("port=%d\n", ln.Addr().(*net.TCPAddr).Port)
	fmt.Fprintf(os.Stderr, "echo_go: listening on %s, GOMAXPROCS %d\n", ln.Addr(), *threads)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				// EMFILE and friends: wait a little and go on (net/http
				// backs off the same way)
				time.Sleep(5 * time.Millisecond)
				continue
			}
			go serve(c)
		}
	}()
	<-stop
	// connections still open are closed by the exit, as in the other servers
	os.Exit(0)
}
