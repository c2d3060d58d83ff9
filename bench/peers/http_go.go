// SPDX-License-Identifier: MIT

// A peer of the HTTP benchmark on Go's net/http:
//
//	http_go --port P [--threads N] [--header-timeout MS] [--idle-timeout MS]
//
// Written the way the net/http documentation shows a server: a handler
// registered for "/" on a ServeMux, an http.Server listening, a goroutine
// per connection (net/http's own). GET / is answered 200 "Hello, World!"
// with Content-Type text/plain, as the other HTTP servers answer it
// (bench/http/http_parse.c); any other path is 404 (http.NotFound). HTTP/1.1
// keep-alive and pipelining, HTTP/1.0 and Connection: close are net/http's.
// net/http adds a Date header and needs no more.
//
// --threads N is GOMAXPROCS (default 1); --header-timeout MS is the
// server's ReadHeaderTimeout (default 10 s) and --idle-timeout MS its
// IdleTimeout (default 60 s): the other servers' defaults. No limit on the
// requests of a connection. 127.0.0.1, "port=P" on stdout once listening
// (--port 0: a free port), SIGINT/SIGTERM: exit 0. bench/runner/run.py
// builds it with go build (offline, standard library only) where go is
// installed.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func hello(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte("Hello, World!"))
}

func main() {
	port := flag.Int("port", -1, "port to listen on (0: a free one)")
	threads := flag.Int("threads", 1, "GOMAXPROCS")
	header := flag.Int("header-timeout", 10000, "deadline for a request header, ms")
	idle := flag.Int("idle-timeout", 60000, "an idle keep-alive connection is closed after this, ms")
	flag.Parse()
	if flag.NArg() != 0 || *port < 0 || *port > 65535 || *threads < 1 || *threads > 256 ||
		*header < 1 || *idle < 1 {
		fmt.Fprintln(os.Stderr, "usage: http_go --port P [--threads N] [--header-timeout MS] [--idle-timeout MS]")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*threads)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	mux := http.NewServeMux()
	mux.HandleFunc("/", hello)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: time.Duration(*header) * time.Millisecond,
		IdleTimeout:       time.Duration(*idle) * time.Millisecond,
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "http_go: listen:", err)
		os.Exit(1)
	}
	fmt.Printf("port=%d\n", ln.Addr().(*net.TCPAddr).Port)
	fmt.Fprintf(os.Stderr, "http_go: listening on %s, GOMAXPROCS %d\n", ln.Addr(), *threads)
	go func() {
		if err := srv.Serve(ln); err != nil {
			fmt.Fprintln(os.Stderr, "http_go: serve:", err)
			os.Exit(1)
		}
	}()
	<-stop
	// connections still open are closed by the exit, as in the other servers
	os.Exit(0)
}
