# libelastic — one entry point for building, testing, benchmarking and installing.
#
#   make            library (lib/), tools (bin/)
#   make test       the whole suite (TAP, "N passed, N failed" at the end)
#   make check      the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       the suite under ThreadSanitizer
#   make valgrind   the suite under valgrind memcheck
#   make fuzz       every libFuzzer target for FUZZ_SECONDS seconds (clang)
#   make bench      the benchmarks (prints tables against the peers)
#   make soak       long fault runs (the checkpoint crash test with SOAK_KILLS SIGKILLs)
#   make demo       the elastic demo: a worker is killed and the job survives
#   make install    PREFIX, LIBDIR, INCLUDEDIR, DESTDIR honoured
#
# Every target first runs `deps`, which installs missing Debian packages when
# run as root and otherwise prints the exact apt-get command and stops.

VARIANT ?= release
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=

VERSION_MAJOR := 0
VERSION := 0.1.0

CC ?= cc
CXX ?= c++
CLANG ?= clang

WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=c11 -g -fPIC -fvisibility=hidden -D_GNU_SOURCE -DELASTIC_BUILDING -Iinclude -Isrc $(WARNINGS)
LIBS := -luv -lzstd -lcrypto -lxxhash -lpthread -ldl -lm

ifeq ($(VARIANT),release)
  OPT := -O2
  SAN :=
  OUT := build/release
  LIB_OUT := lib
  BIN_OUT := bin
else ifeq ($(VARIANT),asan)
  OPT := -O1 -fno-omit-frame-pointer
  SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
  OUT := build/asan
  LIB_OUT := $(OUT)/lib
  BIN_OUT := $(OUT)/bin
else ifeq ($(VARIANT),tsan)
  OPT := -O1 -fno-omit-frame-pointer
  SAN := -fsanitize=thread -Wno-tsan  # gcc: TSan does not model the heartbeat seqlock fences; they are reviewed by hand
  OUT := build/tsan
  LIB_OUT := $(OUT)/lib
  BIN_OUT := $(OUT)/bin
else
  $(error VARIANT must be release, asan or tsan)
endif

CFLAGS_ALL := $(BASE_CFLAGS) $(OPT) $(SAN) $(CFLAGS)
LDFLAGS_ALL := $(SAN) $(LDFLAGS)

LIB_SRC := $(sort $(wildcard src/*/*.c))
LIB_OBJ := $(patsubst %.c,$(OUT)/%.o,$(LIB_SRC))
STATIC_LIB := $(LIB_OUT)/libelastic.a
SHARED_LIB := $(LIB_OUT)/libelastic.so.$(VERSION)
SONAME := libelastic.so.$(VERSION_MAJOR)

TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOLS := $(patsubst tools/%.c,$(BIN_OUT)/%,$(TOOL_SRC))

TEST_SRC := $(sort $(wildcard test/unit/*.c test/integration/*.c)) test/runner.c
TEST_OBJ := $(patsubst %.c,$(OUT)/%.o,$(TEST_SRC))
TEST_BIN := $(OUT)/test/run_tests
# Helper programs the integration tests start (test/helpers/<name>.c -> one binary each).
HELPER_SRC := $(sort $(wildcard test/helpers/*.c))
HELPERS := $(patsubst test/helpers/%.c,$(OUT)/test/helpers/%,$(HELPER_SRC))

# A test double of NCCL and the CUDA runtime (tests only): loaded through ELASTIC_NCCL_LIBRARY.
NCCL_DOUBLE := $(OUT)/test/libnccl_double.so

EXAMPLE_SRC := $(sort $(wildcard examples/c/*.c))
EXAMPLES := $(patsubst examples/c/%.c,$(OUT)/examples/%,$(EXAMPLE_SRC))

# The CUDA + NCCL example is built only where the CUDA toolkit is (release
# builds): sm_90 code for H100/H200 plus PTX that newer GPUs compile at load.
# The shared cudart: libelastic loads the same one with dlopen.
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
ifneq ($(NVCC),)
ifeq ($(VARIANT),release)
  EXAMPLES += $(OUT)/examples/nccl_trainer
endif
endif

BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCHES := $(patsubst bench/%.c,build/release/bench/%,$(BENCH_SRC))

FUZZ_SRC := $(sort $(wildcard test/fuzz/*.c))
FUZZERS := $(patsubst test/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))
FUZZ_SECONDS ?= 20

DEB_PACKAGES := libuv1-dev libzstd-dev libssl-dev libxxhash-dev pkg-config
PKG_MODULES := libuv libzstd libcrypto libxxhash

.PHONY: all deps test check tsan valgrind fuzz bench soak demo install uninstall clean header-check

all: deps $(SHARED_LIB) $(STATIC_LIB) $(TOOLS) $(EXAMPLES)

# ---- dependencies ---------------------------------------------------------

deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="pkg-config"; \
	for m in $(PKG_MODULES); do pkg-config --exists $$m 2>/dev/null || missing="$$missing $$m"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "deps: installing $(DEB_PACKAGES) (missing:$$missing)"; \
	    (apt-get install -y -q --no-install-recommends $(DEB_PACKAGES) >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(DEB_PACKAGES))) || exit 1; \
	  else \
	    echo "deps: missing$$missing. Run as root: apt-get install $(DEB_PACKAGES)"; exit 1; \
	  fi; \
	fi

# ---- library and tools ----------------------------------------------------

$(OUT)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(STATIC_LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED_LIB): $(LIB_OBJ) src/elastic.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/elastic.map -Wl,--no-undefined \
	  $(LDFLAGS_ALL) -o $@ $(LIB_OBJ) $(LIBS)
	ln -sf libelastic.so.$(VERSION) $(LIB_OUT)/$(SONAME)
	ln -sf $(SONAME) $(LIB_OUT)/libelastic.so

$(BIN_OUT)/%: $(OUT)/tools/%.o $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(STATIC_LIB) $(LIBS)

$(OUT)/examples/%: $(OUT)/examples/c/%.o $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(STATIC_LIB) $(LIBS)

$(OUT)/examples/nccl_trainer: examples/cpp/nccl_trainer.cu examples/cpp/elastic.hpp $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 $(NVCC_ARCH) -cudart shared -Iinclude -Iexamples/cpp -o $@ $< $(STATIC_LIB) \
	  -L$(CUDA_HOME)/lib64 -Xlinker -rpath=$(CUDA_HOME)/lib64 -lnccl $(LIBS)

# ---- tests ----------------------------------------------------------------

$(TEST_OBJ) $(HELPERS:%=%.o): CFLAGS_ALL += -Itest

$(TEST_BIN): $(TEST_OBJ) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TEST_OBJ) $(STATIC_LIB) $(LIBS)

$(OUT)/test/helpers/%: $(OUT)/test/helpers/%.o $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(STATIC_LIB) $(LIBS)

$(NCCL_DOUBLE): test/nccl_double/nccl_double.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -fPIC -shared -D_GNU_SOURCE $(OPT) $(SAN) $(WARNINGS) -Wno-missing-prototypes -o $@ $< -lpthread

# The public header must stand alone in strict C99 and in C++.
header-check: deps
	@mkdir -p $(OUT)/header
	$(CC) -std=c99 -pedantic -Werror -Wall -Wextra -Iinclude -fsyntax-only test/header/header_c99.c
	$(CXX) -std=c++11 -pedantic -Werror -Wall -Wextra -Iinclude -fsyntax-only -x c++ test/header/header_c99.c
	@if [ -f "$(CUDA_HOME)/include/nccl.h" ]; then echo "header-check: src/nccl/nccl.h against $(CUDA_HOME)/include/nccl.h"; \
	  $(CC) -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$(CUDA_HOME)/include -fsyntax-only test/header/nccl_layout.c; fi

# TEST_FILTER=substring runs only the matching tests.
test: all header-check $(TEST_BIN) $(HELPERS) $(TOOLS) $(EXAMPLES) $(NCCL_DOUBLE)
	ELASTIC_BIN_DIR=$(abspath $(BIN_OUT)) ELASTIC_LIB_DIR=$(abspath $(LIB_OUT)) ELASTIC_NCCL_DOUBLE=$(abspath $(NCCL_DOUBLE)) \
	ELASTIC_HELPER_DIR=$(abspath $(OUT)/test/helpers) ELASTIC_EXAMPLE_DIR=$(abspath $(OUT)/examples) \
	ELASTIC_SOURCE_DIR=$(CURDIR) \
	  $(TEST_BIN) $(TEST_FILTER)

check:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(MAKE) VARIANT=asan test

tsan:
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(MAKE) VARIANT=tsan test

valgrind: all $(TEST_BIN) $(HELPERS) $(NCCL_DOUBLE)
	ELASTIC_BIN_DIR=$(abspath $(BIN_OUT)) ELASTIC_LIB_DIR=$(abspath $(LIB_OUT)) ELASTIC_NCCL_DOUBLE=$(abspath $(NCCL_DOUBLE)) \
	ELASTIC_HELPER_DIR=$(abspath $(OUT)/test/helpers) ELASTIC_EXAMPLE_DIR=$(abspath $(OUT)/examples) \
	ELASTIC_SOURCE_DIR=$(CURDIR) ELASTIC_TEST_TIMEOUT_SCALE=10 \
	  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	  --trace-children=no $(TEST_BIN) $(TEST_FILTER)

# ---- fuzzing (clang + libFuzzer) ------------------------------------------

build/fuzz/%: test/fuzz/%.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -DELASTIC_BUILDING -Iinclude -Isrc \
	  -o $@ $< $(LIB_SRC) $(LIBS)

fuzz: deps $(FUZZERS)
	@for f in $(FUZZERS); do echo "fuzz: $$f for $(FUZZ_SECONDS)s"; \
	  mkdir -p build/fuzz/corpus/$$(basename $$f); \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 build/fuzz/corpus/$$(basename $$f) || exit 1; done

# ---- soak -----------------------------------------------------------------

SOAK_KILLS ?= 3000
soak:
	ELASTIC_CKPT_KILLS=$(SOAK_KILLS) ELASTIC_TEST_TIMEOUT_SCALE=50 $(MAKE) test TEST_FILTER=ckpt_survives_sigkill

# ---- benchmarks -----------------------------------------------------------

build/release/bench/%: bench/%.c lib/libelastic.a
	@$(MAKE) --no-print-directory VARIANT=release all
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< lib/libelastic.a $(LIBS)

bench: all $(BENCHES)
	@for script in bench/run_*.sh; do [ -e "$$script" ] || continue; echo "== $$script"; \
	  ELASTIC_BENCH_DIR=$(abspath build/release/bench) ELASTIC_BIN_DIR=$(abspath bin) bash $$script || exit 1; done

# ---- demo -----------------------------------------------------------------

demo: all
	@if [ -x examples/demo.sh ]; then ELASTIC_BIN_DIR=$(abspath bin) ELASTIC_EXAMPLE_DIR=$(abspath $(OUT)/examples) \
	  bash examples/demo.sh; else echo "demo: examples/demo.sh is not there yet"; exit 1; fi

# ---- install --------------------------------------------------------------

pkgconfig/elastic.pc: pkgconfig/elastic.pc.in Makefile
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' $< > $@

install: all pkgconfig/elastic.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/elastic $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/elastic.h $(DESTDIR)$(INCLUDEDIR)/elastic.h
	install -m 644 include/elastic/*.h $(DESTDIR)$(INCLUDEDIR)/elastic/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libelastic.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libelastic.so
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/
	install -m 644 pkgconfig/elastic.pc $(DESTDIR)$(PKGCONFIGDIR)/elastic.pc
	for t in $(TOOLS); do install -m 755 $$t $(DESTDIR)$(BINDIR)/; done

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/elastic.h $(DESTDIR)$(LIBDIR)/libelastic.so* $(DESTDIR)$(LIBDIR)/libelastic.a
	rm -rf $(DESTDIR)$(INCLUDEDIR)/elastic
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/elastic.pc
	for t in $(notdir $(TOOLS)); do rm -f $(DESTDIR)$(BINDIR)/$$t; done

clean:
	rm -rf build lib bin pkgconfig/elastic.pc

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
