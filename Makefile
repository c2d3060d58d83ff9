# coring: the README's two commands. Everything else is meson.
#   make test    install what is missing, build (gcc; ASan+UBSan with gcc; TSan with clang), run every test
#   make bench   install what is missing, build optimised, run the benchmarks
# QUICK=1 / FULL=1 pick the benchmark length (see docs/benchmarks.md).

MESON ?= meson
JOBS ?= $(shell nproc)

# The python3 that PATH finds, resolved once (after deps: make test and
# make bench install it) and first on the PATH of everything they run: a
# version manager's shim (pyenv's) runs a chain of shell scripts at each
# start, some 0.4 s of CPU, and the builds' set-up and tests start python3
# several hundred times. The same interpreter, started directly.
PYTHON_DIR := $(CURDIR)/build-python
export PATH := $(if $(findstring $(PYTHON_DIR):,$(PATH)),$(PATH),$(PYTHON_DIR):$(PATH))

.PHONY: all test bench deps-test deps-bench python build clean

all: build

deps-test:
	@sh tools/deps.sh test
	@$(MAKE) --no-print-directory python

deps-bench:
	@sh tools/deps.sh bench
	@$(MAKE) --no-print-directory python

# PYTHON_DIR/python3: a link to the interpreter python3 names outside it
python:
	@mkdir -p $(PYTHON_DIR)
	@ln -sfn "$$(PATH=$$(echo "$$PATH" | sed 's|$(PYTHON_DIR):||g') python3 -c 'import sys; print(sys.executable)')" $(PYTHON_DIR)/python3

# Each build directory is configured once (its build.ninja made); make test
# configures the three at once (meson's setup mostly waits on the compiler's
# checks). Three builds, each a compiler and a configuration the others do
# not test:
#   build       gcc, computed-goto labels, tracing compiled in, and the
#               checks that do not depend on the build (-Dextra_checks)
#   build-asan  gcc under ASan+UBSan, tracing compiled out (as a release
#               build ships), at -O1 (ASan's own advice: gcc compiles it in
#               about two thirds of -O2's time, and its tests run no slower)
#   build-tsan  clang under TSan, the switch label backend
# The sanitizer builds keep line tables only (-g1 after the buildtype's -g):
# what a report needs, the file and line of each frame, for about two
# thirds of the compile time of full debug information.
TEST_BUILDS := build build-asan build-tsan

build/build.ninja:
	@$(MESON) setup build -Dwerror=true >/dev/null
build-asan/build.ninja:
	@$(MESON) setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 -Dbench=disabled -Dextra_checks=false -Dtrace=false -Dc_args=-g1 >/dev/null
build-tsan/build.ninja:
	@CC=clang $(MESON) setup build-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dbench=disabled -Dextra_checks=false -Dlabel_backend=switch -Dc_args=-g1 >/dev/null

build: deps-test
	@$(MAKE) --no-print-directory build/build.ninja
	$(MESON) compile -C build

# tools/test_builds.sh compiles and tests them in turn: the first build
# compiles alone, the others one after another beside the tests, at the
# lowest priority
test: deps-test
	@$(MAKE) --no-print-directory -j3 $(addsuffix /build.ninja,$(TEST_BUILDS))
	@MESON="$(MESON)" sh tools/test_builds.sh $(JOBS) $(TEST_BUILDS)

build-release/build.ninja:
	@$(MESON) setup build-release --buildtype=release -Dtests=disabled >/dev/null

bench: deps-bench
	@$(MAKE) --no-print-directory build-release/build.ninja
	$(MESON) compile -C build-release
	@python3 -B bench/runner/run.py build-release

clean:
	rm -rf build build-asan build-tsan build-release build-python
