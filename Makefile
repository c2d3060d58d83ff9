# coring: the README's two commands. Everything else is meson.
#   make test    install what is missing, build (gcc, clang, ASan+UBSan, TSan), run every test
#   make bench   install what is missing, build optimised, run the benchmarks
# QUICK=1 / FULL=1 pick the benchmark length (see docs/benchmarks.md).

MESON ?= meson
JOBS ?= $(shell nproc)

.PHONY: all test bench deps-test deps-bench build clean

all: build

deps-test:
	@sh tools/deps.sh test

deps-bench:
	@sh tools/deps.sh bench

comma := ,
# configure a build dir once: $(call setup,DIR,ENV,ARGS); a comma inside ARGS
# must be written $(comma), or call splits the argument there

define setup
	@if [ ! -f $(1)/build.ninja ]; then $(2) $(MESON) setup $(1) $(3) >/dev/null || exit 1; fi
endef

build: deps-test
	$(call setup,build,,-Dwerror=true)
	$(MESON) compile -C build

# The ASan+UBSan build is optimised at -O1 (ASan's own advice): gcc compiles it
# in about two thirds of -O2's time, and its tests run no slower.
test: deps-test
	$(call setup,build,,-Dwerror=true)
	$(call setup,build-clang,CC=clang,-Dwerror=true -Dlabel_backend=switch -Dextra_checks=false -Dtrace=false)
	$(call setup,build-asan,,-Dwerror=true -Db_sanitize=address$(comma)undefined -Db_lundef=false -Doptimization=1 -Dbench=disabled -Dextra_checks=false)
	$(call setup,build-tsan,CC=clang,-Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dbench=disabled -Dextra_checks=false)
	@set -e; for d in build build-clang build-asan build-tsan; do \
		echo "== $$d"; \
		$(MESON) compile -C $$d >/dev/null; \
		$(MESON) test -C $$d --print-errorlogs --num-processes $(JOBS); \
	done
	@echo "make test: all build configurations passed"

bench: deps-bench
	$(call setup,build-release,,--buildtype=release -Dtests=disabled)
	$(MESON) compile -C build-release
	@python3 -B bench/runner/run.py build-release

clean:
	rm -rf build build-clang build-asan build-tsan build-release
