// SPDX-License-Identifier: MIT

// The Go peer of bench/contexts/handoff.c: the same hand-offs with goroutines,
// channels and sync.Mutex, GOMAXPROCS=2 (Go places goroutines on its two
// Ps itself: nothing keeps the two sides of a shape on different threads).
//
//	pingpong  one goroutine sends an int64 on a channel of capacity 1, the
//	          other sends it back on a second one: ns per round trip
//	transfer  Go has no transfer: a hop through unbuffered channels to a
//	          goroutine that hands it straight back: ns per round trip
//	spawn     go func() answering input + 1 on a channel, awaited: ns per
//	          round trip
//	chan1, chan16, chan256
//	          a producer goroutine sends 0, 1, 2 ... to a consumer through a
//	          channel of that capacity: items per second
//	chan16_many, chan256_many
//	          chan16 and chan256 again: Go has no receive of many items
//	pingpong_one, chan16_one, chan256_one
//	          pingpong, chan16 and chan256 with GOMAXPROCS=1: one thread
//	mutex1, mutex32
//	          1 (32) goroutines per P, started together, lock a sync.Mutex,
//	          bump a counter, unlock: lock operations per second
//	idle      a burst of ping-pong (at most 0.1 s), then the process's CPU
//	          time over -idle-ms starting 1 ms after its last goroutine ended
//
// Command line and output as bench/contexts/handoff.h says (-miscount
// included); every shape checks its result and the program exits 1 if one
// fails. bench/runner/run.py builds it (go build, offline) when go is found.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	rt      = flag.Int64("rt", 200000, "round trips per round-trip shape")
	items   = flag.Int64("items", 5000000, "items per channel-throughput shape")
	ops     = flag.Int64("ops", 4000000, "lock operations per mutex shape, all goroutines")
	seconds = flag.Float64("seconds", 1.0, "time bound of each shape")
	idleMs  = flag.Int64("idle-ms", 200, "the idle window, ms")
	shapes  = flag.String("shapes", "", "comma-separated shapes (default: all)")
	// one step of every shape wrong on purpose: the shape's check must fail
	miscount = flag.Bool("miscount", false, "get step 7 of every shape wrong (tests the checks)")
)

const miscountAt = 7

// off: 1 at the step -miscount gets wrong, else 0
func off(i int64) int64 {
	if *miscount && i == miscountAt {
		return 1
	}
	return 0
}

var known = []string{"pingpong", "transfer", "spawn", "chan1", "chan16", "chan256",
	"chan16_many", "chan256_many", "pingpong_one", "chan16_one", "chan256_one", "mutex1", "mutex32", "idle"}

var base = time.Now()

func now() int64 { return int64(time.Since(base)) }

// span: from the first worker's start to the last worker's end
type span struct {
	t0, t1 int64
	live   int32
}

func newSpan(workers int32) *span { return &span{live: workers} }
func (s *span) begin()            { atomic.CompareAndSwapInt64(&s.t0, 0, now()) }
func (s *span) end() {
	if atomic.AddInt32(&s.live, -1) == 0 {
		atomic.StoreInt64(&s.t1, now())
	}
}
func (s *span) secs() float64 {
	d := atomic.LoadInt64(&s.t1) - atomic.LoadInt64(&s.t0)
	if d <= 0 {
		d = 1
	}
	return float64(d) / 1e9
}

// pastDeadline: step i is past the time bound (the clock read every `every` steps)
func pastDeadline(i, every int64, deadline int64) bool {
	return i&(every-1) == every-1 && now() > deadline
}

func deadlineIn(secs float64) int64 { return now() + int64(secs*1e9) }

func fail(shape, what string) {
	fmt.Fprintf(os.Stderr, "handoff: go %s: %s\n", shape, what)
	os.Exit(1)
}

func line(shape string, n int64, secs, value float64, unit, extra string) {
	if extra != "" {
		extra = " " + extra
	}
	fmt.Printf("handoff peer=go shape=%s n=%d seconds=%.6f value=%.6g unit=%s%s\n", shape, n, secs,
		value, unit, extra)
}

func reportRT(shape string, n int64, secs float64) {
	line(shape, n, secs, secs*1e9/float64(n), "ns", "")
}

func reportRate(shape string, n int64, secs float64) {
	line(shape, n, secs, float64(n)/secs, "per_s", "")
}

// pingpong over two channels of capacity capacity: the round trips done,
// the span, when its last goroutine finished
func pingpong(shape string, capacity int, n int64, secs float64) (int64, *span, int64) {
	ping, pong := make(chan int64, capacity), make(chan int64, capacity)
	sp := newSpan(1)
	dl := deadlineIn(secs)
	var a, b, aEnd, bEnd int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the answering side: every item back, in order
		defer wg.Done()
		defer func() { bEnd = now() }()
		for v := range ping {
			if v != b {
				fail(shape, "item lost or out of order")
			}
			pong <- v + off(b)
			b++
		}
	}()
	go func() {
		defer wg.Done()
		sp.begin()
		for a = 0; a < n && !pastDeadline(a, 16, dl); a++ {
			ping <- a
			if v := <-pong; v != a {
				fail(shape, "wrong answer")
			}
		}
		sp.end()
		close(ping)
		aEnd = now()
	}()
	wg.Wait()
	if a != b || a < 1 {
		fail(shape, "round trips counted differently on the two sides")
	}
	if bEnd > aEnd {
		aEnd = bEnd
	}
	return a, sp, aEnd
}

func spawn() {
	sp := newSpan(1)
	dl := deadlineIn(*seconds)
	var i int64
	done := make(chan int64)
	finished := make(chan struct{})
	go func() {
		sp.begin()
		for i = 0; i < *rt && !pastDeadline(i, 16, dl); i++ {
			go func(in int64) { done <- in + 1 + off(in) }(i)
			if v := <-done; v != i+1 {
				fail("spawn", "wrong answer")
			}
		}
		sp.end()
		close(finished)
	}()
	<-finished
	reportRT("spawn", i, sp.secs())
}

func throughput(shape string, capacity int) {
	ch := make(chan int64, capacity)
	sp := newSpan(1)
	dl := deadlineIn(*seconds)
	var sent, got int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sp.begin()
		for sent = 0; sent < *items && !pastDeadline(sent, 256, dl); sent++ {
			ch <- sent + off(sent)
		}
		close(ch)
	}()
	go func() {
		defer wg.Done()
		sp.begin()
		for v := range ch {
			if v != got {
				fail(shape, "item lost or out of order")
			}
			got++
		}
		sp.end()
	}()
	wg.Wait()
	if got != sent || got < 1 {
		fail(shape, "items sent and received differ")
	}
	reportRate(shape, got, sp.secs())
}

func mutexShape(shape string, per int) {
	var mu sync.Mutex
	var counter int64
	workers := 2 * per
	done := make([]int64, workers)
	sp := newSpan(int32(workers))
	dl := deadlineIn(*seconds)
	n := *ops / int64(workers)
	var wg, ready sync.WaitGroup
	gate := make(chan struct{}) // closed once every goroutine is there
	wg.Add(workers)
	ready.Add(workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			defer wg.Done()
			ready.Done()
			<-gate
			sp.begin()
			var i int64
			for i = 0; i < n && !pastDeadline(i, 64, dl); i++ {
				mu.Lock()
				counter += 1 + off(i)
				mu.Unlock()
			}
			done[w] = i
			sp.end()
		}(w)
	}
	ready.Wait()
	close(gate)
	wg.Wait()
	var sum int64
	for _, d := range done {
		sum += d
	}
	if counter != sum {
		fail(shape, "the counter differs from the increments made")
	}
	reportRate(shape, sum, sp.secs())
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail("idle", "getrusage failed")
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func idle() {
	burst := *seconds
	if burst > 0.1 {
		burst = 0.1
	}
	n, _, last := pingpong("idle", 1, *rt, burst)
	start := last + int64(time.Millisecond)
	if t := now(); t > start {
		start = t
	}
	time.Sleep(time.Duration(start - now()))
	c0 := cpuSeconds()
	window := time.Duration(*idleMs) * time.Millisecond
	time.Sleep(time.Duration(start + int64(window) - now()))
	c1 := cpuSeconds()
	line("idle", n, window.Seconds(), (c1-c0)*100/window.Seconds(), "cpu_pct",
		fmt.Sprintf("after_ms=%.3f burst=%d", float64(start-last)/1e6, n))
}

func want(name string) bool {
	if *shapes == "" {
		return true
	}
	for _, s := range strings.Split(*shapes, ",") {
		if s == name {
			return true
		}
	}
	return false
}

func usage(what string) {
	fmt.Fprintf(os.Stderr, "handoff_go: %s\n", what)
	flag.Usage()
	os.Exit(2)
}

func main() {
	flag.Parse()
	if flag.NArg() != 0 || *rt < 1 || *rt > 1e9 || *items < 1 || *items > 1e9 || *ops < 64 ||
		*ops > 1e9 || !(*seconds > 0 && *seconds <= 3600) || *idleMs < 1 || *idleMs > 60000 {
		usage("a value out of range")
	}
	if *shapes != "" {
		for _, s := range strings.Split(*shapes, ",") {
			if !strings.Contains(","+strings.Join(known, ",")+",", ","+s+",") {
				usage("unknown shape '" + s + "' (known: " + strings.Join(known, " ") + ")")
			}
		}
	}
	runtime.GOMAXPROCS(2)
	if want("pingpong") {
		n, sp, _ := pingpong("pingpong", 1, *rt, *seconds)
		reportRT("pingpong", n, sp.secs())
	}
	if want("transfer") {
		n, sp, _ := pingpong("transfer", 0, *rt, *seconds)
		reportRT("transfer", n, sp.secs())
	}
	if want("spawn") {
		spawn()
	}
	for _, c := range []int{1, 16, 256} {
		if name := fmt.Sprintf("chan%d", c); want(name) {
			throughput(name, c)
		}
	}
	// Go has no receive of many: its best is the plain receive
	for _, c := range []int{16, 256} {
		if name := fmt.Sprintf("chan%d_many", c); want(name) {
			throughput(name, c)
		}
	}
	runtime.GOMAXPROCS(1)
	if want("pingpong_one") {
		n, sp, _ := pingpong("pingpong_one", 1, *rt, *seconds)
		reportRT("pingpong_one", n, sp.secs())
	}
	for _, c := range []int{16, 256} {
		if name := fmt.Sprintf("chan%d_one", c); want(name) {
			throughput(name, c)
		}
	}
	runtime.GOMAXPROCS(2)
	if want("mutex1") {
		mutexShape("mutex1", 1)
	}
	if want("mutex32") {
		mutexShape("mutex32", 32)
	}
	if want("idle") {
		idle()
	}
}
