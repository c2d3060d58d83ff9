// SPDX-License-Identifier: MIT

//! The tokio peer of bench/contexts/handoff.c: the same hand-offs with tokio
//! tasks, tokio::sync channels and tokio::sync::Mutex, on a multi-thread
//! runtime of 2 workers (tokio places the tasks on its workers itself:
//! nothing keeps the two sides of a shape on different threads; a task
//! woken by a worker usually runs next on that worker).
//!
//!   pingpong  one task sends an i64 on an mpsc channel of capacity 1, the
//!             other sends it back on a second one: ns per round trip
//!   spawn     tokio::spawn of a task answering input + 1, its JoinHandle
//!             awaited: ns per round trip
//!   chan1, chan16, chan256
//!             a producer task sends 0, 1, 2 ... to a consumer task through
//!             an mpsc channel of that capacity: items per second
//!   chan16_many, chan256_many
//!             chan16 and chan256 again: tokio 1.24 (Debian's) has no
//!             receive of many items
//!   pingpong_one, chan16_one, chan256_one
//!             pingpong, chan16 and chan256 on the current-thread runtime:
//!             one thread
//!   mutex1, mutex32
//!             1 (32) tasks per worker, started together (a Barrier), lock
//!             a tokio::sync::Mutex, bump the counter it guards, unlock:
//!             lock operations per second
//!   idle      a burst of ping-pong (at most 0.1 s), then the process's CPU
//!             time over --idle-ms starting 1 ms after its last task ended
//!
//! transfer is not measured: tokio cannot move a task to another thread,
//! and its channels have no capacity 0 (Go's stand-in for it).
//!
//! Command line and output as bench/contexts/handoff.h says (--miscount
//! included); every shape checks its result and the program exits 1 if one
//! fails. bench/runner/run.py builds it offline with Debian's cargo and
//! the crates Debian installs (librust-tokio-dev), from
//! bench/peers/Cargo.toml.in.

use std::process::exit;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Runtime};
use tokio::sync::{mpsc, Barrier, Mutex};

const KNOWN: &[&str] = &[
    "pingpong", "spawn", "chan1", "chan16", "chan256", "chan16_many", "chan256_many", "pingpong_one",
    "chan16_one", "chan256_one", "mutex1", "mutex32", "idle",
];
const MISCOUNT_AT: i64 = 7;

struct Args {
    rt: i64,
    items: i64,
    ops: i64,
    seconds: f64,
    idle_ms: i64,
    shapes: Option<Vec<String>>,
    miscount: bool,
}

// set once at the start of main, before any task runs (rustc 1.63, Debian's,
// has no OnceLock)
static ARGS: AtomicPtr<Args> = AtomicPtr::new(std::ptr::null_mut());
static BASE: AtomicPtr<Instant> = AtomicPtr::new(std::ptr::null_mut());

fn args() -> &'static Args {
    unsafe { &*ARGS.load(Ordering::Acquire) }
}

fn now() -> i64 {
    unsafe { &*BASE.load(Ordering::Acquire) }.elapsed().as_nanos() as i64
}

/// 1 at the step --miscount gets wrong, else 0
fn off(i: i64) -> i64 {
    (args().miscount && i == MISCOUNT_AT) as i64
}

/// step i is past the time bound (the clock read every `every` steps)
fn past_deadline(i: i64, every: i64, deadline: i64) -> bool {
    i & (every - 1) == every - 1 && now() > deadline
}

fn deadline_in(secs: f64) -> i64 {
    now() + (secs * 1e9) as i64
}

fn fail(shape: &str, what: &str) -> ! {
    eprintln!("handoff: tokio {}: {}", shape, what);
    exit(1)
}

/// From the first worker's start to the last worker's end.
struct Span {
    t0: AtomicI64,
    t1: AtomicI64,
    live: AtomicI32,
}

impl Span {
    fn new(workers: i32) -> Arc<Span> {
        Arc::new(Span { t0: AtomicI64::new(0), t1: AtomicI64::new(0), live: AtomicI32::new(workers) })
    }
    fn begin(&self) {
        let _ = self.t0.compare_exchange(0, now(), Ordering::SeqCst, Ordering::SeqCst);
    }
    fn end(&self) {
        if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.t1.store(now(), Ordering::SeqCst);
        }
    }
    fn secs(&self) -> f64 {
        let d = self.t1.load(Ordering::SeqCst) - self.t0.load(Ordering::SeqCst);
        d.max(1) as f64 / 1e9
    }
}

/// value with 6 significant digits, as the C and Go peers' %.6g
fn sig6(v: f64) -> f64 {
    format!("{:.5e}", v).parse().unwrap_or(v)
}

fn line(shape: &str, n: i64, secs: f64, value: f64, unit: &str, extra: &str) {
    let extra = if extra.is_empty() { String::new() } else { format!(" {}", extra) };
    println!("handoff peer=tokio shape={} n={} seconds={:.6} value={} unit={}{}", shape, n, secs,
             sig6(value), unit, extra);
}

fn report_rt(shape: &str, n: i64, secs: f64) {
    line(shape, n, secs, secs * 1e9 / n as f64, "ns", "");
}

fn report_rate(shape: &str, n: i64, secs: f64) {
    line(shape, n, secs, n as f64 / secs, "per_s", "");
}

/// Ping-pong over two channels of capacity 1: the round trips done, the
/// span, when its last task finished.
async fn pingpong(shape: &'static str, n: i64, secs: f64) -> (i64, Arc<Span>, i64) {
    let (ping_tx, mut ping_rx) = mpsc::channel::<i64>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<i64>(1);
    let sp = Span::new(1);
    let dl = deadline_in(secs);
    // the answering side: every item back, in order
    let b = tokio::spawn(async move {
        let mut b = 0i64;
        while let Some(v) = ping_rx.recv().await {
            if v != b {
                fail(shape, "item lost or out of order");
            }
            if pong_tx.send(v + off(b)).await.is_err() {
                fail(shape, "the other side went away");
            }
            b += 1;
        }
        (b, now())
    });
    let spa = sp.clone();
    let a = tokio::spawn(async move {
        spa.begin();
        let mut a = 0i64;
        while a < n && !past_deadline(a, 16, dl) {
            if ping_tx.send(a).await.is_err() {
                fail(shape, "the other side went away");
            }
            if pong_rx.recv().await != Some(a) {
                fail(shape, "wrong answer");
            }
            a += 1;
        }
        spa.end();
        drop(ping_tx); // ends the other side
        (a, now())
    });
    let (a, a_end) = a.await.unwrap();
    let (b, b_end) = b.await.unwrap();
    if a != b || a < 1 {
        fail(shape, "round trips counted differently on the two sides");
    }
    (a, sp, a_end.max(b_end))
}

async fn spawn_shape() {
    let sp = Span::new(1);
    let dl = deadline_in(args().seconds);
    let spa = sp.clone();
    let n = tokio::spawn(async move {
        spa.begin();
        let mut i = 0i64;
        while i < args().rt && !past_deadline(i, 16, dl) {
            let v = tokio::spawn(async move { i + 1 + off(i) }).await.unwrap();
            if v != i + 1 {
                fail("spawn", "wrong answer");
            }
            i += 1;
        }
        spa.end();
        i
    })
    .await
    .unwrap();
    report_rt("spawn", n, sp.secs());
}

async fn throughput(shape: &'static str, capacity: usize) {
    let (tx, mut rx) = mpsc::channel::<i64>(capacity);
    let sp = Span::new(1);
    let dl = deadline_in(args().seconds);
    let spp = sp.clone();
    let producer = tokio::spawn(async move {
        spp.begin();
        let mut sent = 0i64;
        while sent < args().items && !past_deadline(sent, 256, dl) {
            if tx.send(sent + off(sent)).await.is_err() {
                fail(shape, "the consumer went away");
            }
            sent += 1;
        }
        sent // tx dropped here: the consumer's recv ends
    });
    let spc = sp.clone();
    let consumer = tokio::spawn(async move {
        spc.begin();
        let mut got = 0i64;
        while let Some(v) = rx.recv().await {
            if v != got {
                fail(shape, "item lost or out of order");
            }
            got += 1;
        }
        spc.end();
        got
    });
    let sent = producer.await.unwrap();
    let got = consumer.await.unwrap();
    if got != sent || got < 1 {
        fail(shape, "items sent and received differ");
    }
    report_rate(shape, got, sp.secs());
}

async fn mutex_shape(shape: &'static str, per: usize) {
    let workers = 2 * per;
    let mu = Arc::new(Mutex::new(0i64));
    let gate = Arc::new(Barrier::new(workers));
    let sp = Span::new(workers as i32);
    let dl = deadline_in(args().seconds);
    let n = args().ops / workers as i64;
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (mu, gate, sp) = (mu.clone(), gate.clone(), sp.clone());
        tasks.push(tokio::spawn(async move {
            gate.wait().await;
            sp.begin();
            let mut i = 0i64;
            while i < n && !past_deadline(i, 64, dl) {
                let mut counter = mu.lock().await;
                *counter += 1 + off(i);
                drop(counter);
                i += 1;
            }
            sp.end();
            i
        }));
    }
    let mut sum = 0i64;
    for t in tasks {
        sum += t.await.unwrap();
    }
    if *mu.lock().await != sum {
        fail(shape, "the counter differs from the increments made");
    }
    report_rate(shape, sum, sp.secs());
}

fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        fail("idle", "getrusage failed");
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// The burst on rt, then the idle window with rt's workers still there.
fn idle(rt: &Runtime) {
    let burst = args().seconds.min(0.1);
    let (n, _, last) = rt.block_on(pingpong("idle", args().rt, burst));
    let start = (last + 1_000_000).max(now());
    let sleep_until = |t: i64| {
        let d = t - now();
        if d > 0 {
            std::thread::sleep(Duration::from_nanos(d as u64));
        }
    };
    sleep_until(start);
    let c0 = cpu_seconds();
    let window = args().idle_ms * 1_000_000;
    sleep_until(start + window);
    let c1 = cpu_seconds();
    let w = window as f64 / 1e9;
    line("idle", n, w, (c1 - c0) * 100.0 / w, "cpu_pct",
         &format!("after_ms={:.3} burst={}", (start - last) as f64 / 1e6, n));
}

fn usage(what: &str) -> ! {
    eprintln!("handoff_tokio: {}", what);
    eprintln!("usage: handoff_tokio [--rt N] [--items N] [--ops N] [--seconds S] [--idle-ms MS] \
               [--shapes a,b,...] [--miscount]");
    exit(2)
}

fn parse() -> Args {
    let mut a = Args { rt: 200000, items: 5000000, ops: 4000000, seconds: 1.0, idle_ms: 200, shapes: None,
                       miscount: false };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let k = argv[i].as_str();
        if k == "--miscount" {
            a.miscount = true;
            i += 1;
            continue;
        }
        let v = match argv.get(i + 1) {
            Some(v) if !v.is_empty() => v.as_str(),
            _ => usage(&format!("{} needs a value", k)),
        };
        let num = || v.parse::<i64>().unwrap_or_else(|_| usage(&format!("{} {}: not a number", k, v)));
        match k {
            "--rt" => a.rt = num(),
            "--items" => a.items = num(),
            "--ops" => a.ops = num(),
            "--idle-ms" => a.idle_ms = num(),
            "--seconds" => a.seconds = v.parse().unwrap_or_else(|_| usage(&format!("--seconds {}", v))),
            "--shapes" => {
                let s: Vec<String> = v.split(',').map(String::from).collect();
                for x in &s {
                    if !KNOWN.contains(&x.as_str()) {
                        usage(&format!("unknown shape '{}' (known: {})", x, KNOWN.join(" ")));
                    }
                }
                a.shapes = Some(s);
            }
            _ => usage(&format!("unknown option {}", k)),
        }
        i += 2;
    }
    let big = 1_000_000_000;
    if !(1..=big).contains(&a.rt) || !(1..=big).contains(&a.items) || !(64..=big).contains(&a.ops) ||
        !(a.seconds > 0.0 && a.seconds <= 3600.0) || !(1..=60000).contains(&a.idle_ms) {
        usage("a value out of range");
    }
    a
}

fn want(name: &str) -> bool {
    match &args().shapes {
        None => true,
        Some(s) => s.iter().any(|x| x == name),
    }
}

fn main() {
    ARGS.store(Box::into_raw(Box::new(parse())), Ordering::Release);
    BASE.store(Box::into_raw(Box::new(Instant::now())), Ordering::Release);
    let two = Builder::new_multi_thread().worker_threads(2).build().expect("handoff_tokio: runtime");
    let secs = args().seconds;
    if want("pingpong") {
        let (n, sp, _) = two.block_on(pingpong("pingpong", args().rt, secs));
        report_rt("pingpong", n, sp.secs());
    }
    if want("spawn") {
        two.block_on(spawn_shape());
    }
    for (name, c) in [("chan1", 1), ("chan16", 16), ("chan256", 256)] {
        if want(name) {
            two.block_on(throughput(name, c));
        }
    }
    // tokio 1.24 has no receive of many: its best is the plain receive
    for (name, c) in [("chan16_many", 16), ("chan256_many", 256)] {
        if want(name) {
            two.block_on(throughput(name, c));
        }
    }
    let one = Builder::new_current_thread().build().expect("handoff_tokio: runtime");
    if want("pingpong_one") {
        let (n, sp, _) = one.block_on(pingpong("pingpong_one", args().rt, secs));
        report_rt("pingpong_one", n, sp.secs());
    }
    for (name, c) in [("chan16_one", 16), ("chan256_one", 256)] {
        if want(name) {
            one.block_on(throughput(name, c));
        }
    }
    drop(one);
    if want("mutex1") {
        two.block_on(mutex_shape("mutex1", 1));
    }
    if want("mutex32") {
        two.block_on(mutex_shape("mutex32", 32));
    }
    if want("idle") {
        idle(&two);
    }
}
