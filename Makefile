# Thin front door: the real build is CMake (CMakePresets.json). Every target bootstraps first.
JOBS ?= $(shell nproc)

.PHONY: all bootstrap build demo test test-asan test-tsan bench fuzz format tidy clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake --preset default >/dev/null
	@cmake --build --preset default -j $(JOBS)

demo: build
	@./build/examples/memscope_demo build/demo

test: build
	@ctest --preset default -j $(JOBS)

test-asan: bootstrap
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

test-tsan: bootstrap
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	@ctest --preset tsan -j $(JOBS)

bench: build
	@./build/bench/memscope_bench --benchmark_out=build/bench-results.json --benchmark_out_format=json
	@if [ -x build/bench/memscope_bench_jemalloc ]; then ./build/bench/memscope_bench_jemalloc \
	  --benchmark_out=build/bench-results-jemalloc.json --benchmark_out_format=json; fi
	@python3 bench/summarize.py build/bench-results*.json > build/bench-summary.md

# Each libFuzzer target for FUZZ_SECONDS (new inputs it finds go to build-fuzz/corpus-*).
FUZZ_SECONDS ?= 60
fuzz: bootstrap
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS) --target fuzz_config fuzz_size
	@for t in config size; do mkdir -p build-fuzz/corpus-$$t; \
	  ./build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) build-fuzz/corpus-$$t fuzz/corpus/$$t || exit 1; done

format:
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

tidy: build
	@git ls-files 'src/*.cpp' | xargs clang-tidy -p build --quiet

clean:
	@rm -rf build build-asan build-tsan build-fuzz
