#!/bin/sh
# The Makefile's python3 (make python, run by make test and make bench
# after their deps): the interpreter that PATH's python3 leads to, started
# directly. With a shim first on PATH (as a version manager's), the link
# names the interpreter the shim runs, not the shim; every recipe finds the
# link first, so starting python3 there never runs the shim; made again
# with the link already first on PATH (a make inside make), it still
# names the interpreter, not itself.
#   make_python.sh SRCROOT
set -eu
src=$1
command -v make >/dev/null 2>&1 || { echo "skip: no make"; exit 77; }
real=$(python3 -c 'import sys; print(sys.executable)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/shim" "$tmp/work"
cat >"$tmp/shim/python3" <<SHIM
#!/bin/sh
echo x >>"$tmp/started"
exec "$real" "\$@"
SHIM
chmod +x "$tmp/shim/python3"
w=$tmp/work
mk() { make --no-print-directory -f "$src/Makefile" -C "$w" "$@"; }
PATH=$tmp/shim:$PATH mk python --eval 'probe: ; @python3 -c pass; command -v python3' probe >"$tmp/out"
link=$(readlink "$w/build-python/python3")
[ "$link" = "$real" ] || { echo "FAIL: build-python/python3 -> $link, not $real"; exit 1; }
[ "$(cat "$tmp/out")" = "$w/build-python/python3" ] ||
	{ echo "FAIL: a recipe's python3 is $(cat "$tmp/out"), not $w/build-python/python3"; exit 1; }
[ "$(wc -l <"$tmp/started")" -eq 1 ] ||
	{ echo "FAIL: the shim started $(wc -l <"$tmp/started") times, not once (the resolution)"; exit 1; }
PATH=$w/build-python:$tmp/shim:$PATH mk python
link=$(readlink "$w/build-python/python3")
[ "$link" = "$real" ] || { echo "FAIL: made again: build-python/python3 -> $link, not $real"; exit 1; }
echo "ok: make python links $real; recipes start it directly"
