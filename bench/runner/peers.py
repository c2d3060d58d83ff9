# SPDX-License-Identifier: MIT
"""The peers the runner builds itself (meson builds the C and C++ ones,
bench/peers/meson.build): Go's, with go build, and tokio's, with Debian's
cargo, both offline and inside the build directory (caches, GOPATH,
CARGO_HOME, target dir: nothing written to the source tree or $HOME).

    build(build_dir, name) -> (path, None) or (None, why not, in a few words)
    missing(name) -> why its tools or crates are not there, or None

BENCH_PEERS=0 in the environment: none is built (make test builds them in one
of its build dirs only: they do not depend on the C compiler).

Go: bench/peers/echo_go.go, http_go.go and bench/contexts/handoff.go, the
standard library only (GOPROXY=off, GOTOOLCHAIN=local). tokio:
bench/peers/echo_tokio.rs and bench/contexts/handoff_tokio.rs, one cargo
package (bench/peers/Cargo.toml.in, written into BUILD_DIR/tokio/) built by
/usr/bin/cargo and /usr/bin/rustc with crates.io replaced by Debian's
directory of crates (/usr/share/cargo/registry, where librust-tokio-dev puts
tokio and what it needs). Each binary is copied to where benchlib.program
finds it (BUILD_DIR/bench/peers/, BUILD_DIR/bench/contexts/). A failed build
leaves its output in BUILD_DIR/go/NAME.log or BUILD_DIR/tokio/build.log."""

import fcntl
import glob
import os
import re
import shutil
import signal
import subprocess

import benchlib

# bench/, the source folder this runner is in
BENCH_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GO_SOURCES = {"echo_go": "peers/echo_go.go", "http_go": "peers/http_go.go",
              "handoff_go": "contexts/handoff.go"}
TOKIO_BINS = ["echo_tokio", "handoff_tokio"]
CARGO, RUSTC = "/usr/bin/cargo", "/usr/bin/rustc"   # Debian's, not a rustup toolchain
REGISTRY = "/usr/share/cargo/registry"
CARGO_CONFIG = f"""\
[source.crates-io]
replace-with = "debian"

[source.debian]
directory = "{REGISTRY}"

[net]
offline = true
"""
BUILD_TIMEOUT = 900  # s


def built_here(name):
    """Whether the runner builds the peer name (not meson)."""
    return name in GO_SOURCES or name in TOKIO_BINS


def run_logged(argv, env, cwd, log):
    """argv to its end in its own process group, its output into log: its
    status. Stopped with the run (an exception, SIGTERM's exit), the whole
    group is killed: no compiler left behind."""
    with open(log, "w") as out:
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return p.wait(BUILD_TIMEOUT)
        except BaseException:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
            raise


def last_line(log):
    try:
        with open(log) as f:
            lines = [x.strip() for x in f if x.strip()]
    except OSError:
        return ""
    return lines[-1][:160] if lines else ""


def build_go(build, name):
    if missing(name):
        return None, missing(name)
    go = shutil.which("go")
    gdir = os.path.join(os.path.abspath(build), "go")
    os.makedirs(gdir, exist_ok=True)
    exe = os.path.abspath(benchlib.program(os.path.join(build, "bench"), name))
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    # go build's work directory in the build dir, not $TMPDIR: a build
    # killed with the run (run_logged) cannot remove it; the next build does
    gtmp = os.path.join(gdir, "tmp")
    shutil.rmtree(gtmp, ignore_errors=True)
    os.makedirs(gtmp)
    env = dict(os.environ, GOCACHE=os.path.join(gdir, "cache"), GOPATH=os.path.join(gdir, "path"),
               GOTMPDIR=gtmp, GOFLAGS="", GOPROXY="off", GOENV="off", GOTOOLCHAIN="local",
               GO111MODULE="")
    log = os.path.join(gdir, f"{name}.log")
    try:
        rc = run_logged([go, "build", "-o", exe, os.path.join(BENCH_SRC, GO_SOURCES[name])], env, gdir, log)
    except subprocess.TimeoutExpired:
        return None, f"go build took over {BUILD_TIMEOUT} s (log: {log})"
    if rc != 0:
        return None, f"go build failed: {last_line(log)} (log: {log})"
    return exe, None


def tokio_in_registry():
    """Whether Debian's tokio sources are there (librust-tokio-dev)."""
    return bool(glob.glob(os.path.join(REGISTRY, "tokio-1.*", "Cargo.toml")))


def build_tokio(build):
    """Both tokio binaries: ({name: path}, None) or (None, why not)."""
    if missing(TOKIO_BINS[0]):
        return None, missing(TOKIO_BINS[0])
    tdir = os.path.join(os.path.abspath(build), "tokio")
    home = os.path.join(tdir, "cargo-home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(BENCH_SRC, "peers", "Cargo.toml.in")) as f:
        manifest = f.read().replace("@PEERS@", os.path.join(BENCH_SRC, "peers")) \
            .replace("@CONTEXTS@", os.path.join(BENCH_SRC, "contexts"))
    for path, text in ((os.path.join(tdir, "Cargo.toml"), manifest),
                       (os.path.join(home, "config.toml"), CARGO_CONFIG)):
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        if old != text:  # unchanged: cargo's no-op build stays a no-op
            with open(path, "w") as f:
                f.write(text)
    target = os.path.join(tdir, "target")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUSTUP", "RUSTC"))}
    env.update(CARGO_HOME=home, CARGO_TARGET_DIR=target, RUSTC=RUSTC)
    log = os.path.join(tdir, "build.log")
    try:
        rc = run_logged([CARGO, "build", "--release", "--offline", "--bins",
                         "--manifest-path", os.path.join(tdir, "Cargo.toml")], env, tdir, log)
    except subprocess.TimeoutExpired:
        return None, f"cargo build took over {BUILD_TIMEOUT} s (log: {log})"
    if rc != 0:
        return None, f"cargo build --offline failed: {last_line(log)} (log: {log})"
    out = {}
    for name in TOKIO_BINS:
        exe = os.path.abspath(benchlib.program(os.path.join(build, "bench"), name))
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        tmp = exe + ".new"
        shutil.copy2(os.path.join(target, "release", name), tmp)
        os.replace(tmp, exe)  # a running copy is not overwritten in place
        out[name] = exe
    return out, None


def missing(name):
    """Why the peer name cannot be built on this machine (its tools or
    crates are not installed), or None."""
    if name in GO_SOURCES:
        return None if shutil.which("go") else "go not found (golang-go missing)"
    if not (os.access(CARGO, os.X_OK) and os.access(RUSTC, os.X_OK)):
        return f"{CARGO} or {RUSTC} not found (Debian's cargo missing)"
    if not tokio_in_registry():
        return f"no tokio crate under {REGISTRY} (librust-tokio-dev missing)"
    return None


def build(build_dir, name):
    """Build the peer name into build_dir: (its path, None) or (None, why not).
    One build at a time per build dir (tests that need a peer run side by
    side under meson): the others wait, then find it built (a no-op build)."""
    if os.environ.get("BENCH_PEERS") == "0":
        return None, "BENCH_PEERS=0: built in another build dir"
    os.makedirs(build_dir, exist_ok=True)
    with open(os.path.join(build_dir, "peers.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if name in GO_SOURCES:
            return build_go(build_dir, name)
        got, why = build_tokio(build_dir)
        return (got[name], None) if got else (None, why)


def versions(build_dir, name):
    """What the peer name was built with, for the run's output."""
    if name in GO_SOURCES:
        p = subprocess.run(["go", "version"], capture_output=True, text=True)
        return p.stdout.strip()
    tokio = "tokio ?"
    try:
        with open(os.path.join(os.path.abspath(build_dir), "tokio", "Cargo.lock")) as f:
            m = re.search(r'name = "tokio"\nversion = "([^"]+)"', f.read())
            if m:
                tokio = f"tokio {m.group(1)}"
    except OSError:
        pass
    p = subprocess.run([RUSTC, "--version"], capture_output=True, text=True)
    return f"{tokio}, {p.stdout.strip()} (Debian's cargo, offline)"
