#!/bin/sh
# Installs the Debian packages a make target needs: deps.sh test|bench|docs
# As root it runs apt-get; otherwise it prints the exact command and fails.
set -eu
common="meson ninja-build pkg-config gcc liburing-dev libck-dev"
case "${1:-test}" in
test)  want="$common libcmocka-dev clang llvm lld gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-user qemu-system-arm valgrind"
       # the application's test against the real clients (test_kv_server redis_tools)
       want="$want redis-tools" ;;
bench) want="$common g++ python3 wrk gnuplot-nox strace util-linux fio valgrind gcc-arm-none-eabi qemu-user golang-go"
       # the peers of bench/peers/ (libuv, Boost.Asio headers, nginx; Go's net and net/http
       # with golang-go above; tokio, built offline from Debian's crates) and of the
       # application (redis)
       want="$want libuv1-dev libboost-dev nginx-light cargo librust-tokio-dev redis-server redis-tools" ;;
# the pictures of docs/tracing.md (tools/trace_pictures.sh)
docs)  want="$common libcmocka-dev python3 binutils graphviz gnuplot-nox" ;;
*) echo "usage: $0 test|bench|docs" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "coring: missing Debian packages:$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "coring: run this, then try again:"
	echo "  sudo apt-get update && sudo apt-get install -y$missing"
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
