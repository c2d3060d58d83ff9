// SPDX-License-Identifier: MIT

//! A peer of the echo benchmark on tokio:
//!
//!     echo_tokio --port P [--threads N]
//!
//! Written the way tokio's documentation shows an echo server: a
//! TcpListener, an accept loop that spawns a task per connection, the task
//! reading into its buffer and answering with write_all until EOF or an
//! error. The buffer is 16 KiB, the other servers' size
//! (bench/server/bench_util.h), and every connection gets TCP_NODELAY, as
//! in the other servers (tokio leaves it off).
//!
//! --threads 1 (the default) runs tokio's current-thread runtime: the
//! accept loop and every connection on one thread, as one coring context;
//! --threads N > 1 runs the multi-thread runtime with N workers (tokio
//! spreads the tasks over them itself; one listener serves them all, where
//! the other servers open one SO_REUSEPORT listener per thread). The
//! listener is a tokio TcpSocket with SO_REUSEADDR and the other servers'
//! backlog (4096; TcpListener::bind would take 1024). 127.0.0.1, "port=P" on stdout once listening
//! (--port 0: a free port), SIGINT/SIGTERM: exit 0.
//!
//! bench/runner/run.py builds it offline with Debian's cargo and the
//! crates Debian installs (librust-tokio-dev), from bench/peers/Cargo.toml.in.

use std::process::exit;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

const BUF_SIZE: usize = 16384;

fn usage() -> ! {
    eprintln!("usage: echo_tokio --port P [--threads N]");
    exit(2)
}

fn parse() -> (u16, usize) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut port, mut threads) = (None, 1usize);
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--port" => port = Some(v.parse::<u16>().unwrap_or_else(|_| usage())),
            "--threads" => threads = v.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
        i += 2;
    }
    if !(1..=256).contains(&threads) {
        usage();
    }
    (port.unwrap_or_else(|| usage()), threads)
}

async fn serve(mut socket: TcpStream) {
    let mut buf = vec![0u8; BUF_SIZE];
    loop {
        let n = match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return, // EOF or an error: the connection is done
            Ok(n) => n,
        };
        if socket.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn listen(port: u16) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
    socket.listen(4096)
}

async fn run(port: u16, threads: usize) {
    let listener = match listen(port) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("echo_tokio: listen: {}", e);
            exit(1);
        }
    };
    let mut term = signal(SignalKind::terminate()).expect("echo_tokio: signal");
    let mut int = signal(SignalKind::interrupt()).expect("echo_tokio: signal");
    let addr = listener.local_addr().expect("echo_tokio: local_addr");
    println!("port={}", addr.port());
    eprintln!("echo_tokio: listening on {}, {} thread(s)", addr, threads);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => {
                    let _ = socket.set_nodelay(true);
                    tokio::spawn(serve(socket));
                }
                // EMFILE and friends: go on (the next accept may succeed)
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    // connections still open are closed by the exit, as in the other servers
    exit(0);
}

fn main() {
    let (port, threads) = parse();
    let rt = if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    };
    rt.expect("echo_tokio: runtime").block_on(run(port, threads));
}
