# libelastic — one entry point for building, testing, benchmarking and installing.
#
#   make            library (lib/), tools (bin/)
#   make test       the whole suite (TAP, "N passed, N failed" at the end), up
#                   to TEST_JOBS tests at once; TEST_FILTER=store runs a
#                   module's tests (see "tests" below)
#   make check      the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       the suite under ThreadSanitizer
#   make valgrind   the suite under valgrind memcheck
#   make fuzz       every libFuzzer target for FUZZ_SECONDS seconds (clang)
#   make bench      the benchmarks (prints tables against the peers)
#   make soak       long fault runs (the checkpoint crash test with SOAK_KILLS SIGKILLs,
#                   the power-cut test with SOAK_POWERCUTS cuts)
#   make chaos      a seeded random schedule of overlapping faults against the
#                   demo trainer on simulated hosts, c10d and etcd in turn, and
#                   its invariants (CHAOS_MINUTES, CHAOS_SEED; root, test/chaos/)
#   make demo       the elastic demo: a worker is killed and the job survives
#                   (TRAINER=rust: with the Rust trainer of examples/rust)
#   make install    PREFIX, LIBDIR, INCLUDEDIR, PYTHONDIR, DESTDIR honoured
#   make wheel      a self-contained wheel in dist/ (library, elasticrun, elasticctl)
#   make lib        only the library (lib/libelastic.so, lib/libelastic.a)
#
# Build knobs (zstd's ZSTD_LIB_* style), for `make lib` / `make install`:
#   ELASTIC_AGENT=0 a library without the agent and what only it needs (the
#                   probes, the store server, libuv): a trainer that saves
#                   checkpoints links none of it
#   ELASTIC_ETCD=0  without the etcd client and rendezvous backend (libcurl;
#                   with ELASTIC_AGENT=0 also json-c)
# Each builds into its own directory (build/release-without-agent/...); the
# left-out calls fail with ELASTIC_EUNSUPPORTED and elastic_has_feature() says
# 0 for them. The suite runs without etcd, not without the agent.
#
# Every package is named once, in deps/debian.txt. `make deps` installs what is
# missing when run as root: the build libraries (else it prints the apt-get
# line and stops) and what the tests use (else it prints the line once and the
# suite skips what needs them). `make test` runs it first; `make demo` installs
# only the build libraries; building and installing only check for the
# libraries and say what is missing.

VARIANT ?= release
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PYTHONDIR ?= $(PREFIX)/lib/python3/dist-packages
DESTDIR ?=

# The version is written once, in include/elastic/common.h; the SONAME follows its major.
header_version = $(shell sed -n 's/^\#define ELASTIC_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' include/elastic/common.h)
VERSION_MAJOR := $(call header_version,MAJOR)
VERSION := $(VERSION_MAJOR).$(call header_version,MINOR).$(call header_version,PATCH)
ifeq ($(words $(subst ., ,$(VERSION))),3)
else
  $(error cannot read ELASTIC_VERSION_MAJOR/MINOR/PATCH from include/elastic/common.h (got "$(VERSION)"))
endif

CC ?= cc
CXX ?= c++
CLANG ?= clang

WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=c11 -g -fPIC -fvisibility=hidden -D_GNU_SOURCE -DELASTIC_BUILDING -Iinclude -Isrc $(WARNINGS)

# ---- parts that can be left out (build knobs) -------------------------------

# A part is a list of sources (patterns under src/) and the feature names
# elastic_has_feature() then denies; ELASTIC_<PART>=0 leaves them out and
# compiles src/without/<part>*.c in their place (the part's public calls,
# failing with ELASTIC_EUNSUPPORTED). Its libraries are the deps/debian.txt
# lines of that part: they are linked only while some part that needs them is
# in. A new part adds its KNOB_, SRC_ and FEATURES_ lines and its word to PARTS.
PARTS := agent etcd

# ELASTIC_AGENT=0: the agent, its probes, the store server it hosts (libuv) and
# the JSON reader only it uses, with the goodput accounting's reading of its journal
# (src/without/agent*.c in their place). The
# suite, the demo and the benchmarks need it (SUITE_NEEDS).
KNOB_agent := ELASTIC_AGENT
SRC_agent := src/agent/% src/probe/% src/store/server%.c src/store/kv%.c src/common/json.c \
  src/common/goodput_event.c src/common/failure_class.c src/common/failure_policy.c src/common/failure_record.c
FEATURES_agent := agent store_server
ELASTIC_AGENT ?= 1

# ELASTIC_ETCD=0: the etcd v3 client (src/etcd/) and the etcd rendezvous
# backend (src/rdzv/backend_etcd*.c), and so libcurl. `--rdzv-backend=etcd-v3`
# then fails with "built without etcd (ELASTIC_ETCD=0)" (src/rdzv/api.c, under
# -DELASTIC_WITH_ETCD=0); the tests that need etcd (those including
# support/etcd_fixture.h) are not built, the rest of the suite runs.
KNOB_etcd := ELASTIC_ETCD
SRC_etcd := src/etcd/% src/rdzv/backend_etcd%.c
FEATURES_etcd := etcd
CFLAGS_etcd := -DELASTIC_WITH_ETCD=0
TESTS_NEED_etcd = $(shell grep -l 'support/etcd_fixture.h' $(TEST_SRC_ALL))
ELASTIC_ETCD ?= 1

SUITE_NEEDS := agent
$(foreach p,$(PARTS),$(if $(filter 0 1,$($(KNOB_$(p)))),,$(error $(KNOB_$(p)) must be 1 (build the $(p) part) or 0 (leave it out), not "$($(KNOB_$(p)))")))
LEFT_OUT := $(strip $(foreach p,$(PARTS),$(if $(filter 0,$($(KNOB_$(p)))),$(p))))
PARTS_IN := core $(filter-out $(LEFT_OUT),$(PARTS))

# deps/debian.txt: "build PART PACKAGE MODULE FLAGS PC" lines of the parts in.
DEPS_FILE := deps/debian.txt
comma := ,
space := $(empty) $(empty)
# Fields of the build lines whose PART (comma list) names a part that is in.
build_field = $(shell awk -v parts=" $(PARTS_IN) " -v f=$(1) '$$1 == "build" { \
  n = split($$2, p, ","); for (i = 1; i <= n; i++) if (index(parts, " " p[i] " ")) { \
  if ($$f != "-") print $$f; break } }' $(DEPS_FILE))
DEB_PACKAGES := $(sort $(call build_field,3) $(shell awk '$$1 == "tool" { print $$3 }' $(DEPS_FILE)))
PKG_MODULES := $(call build_field,4)
LIBS := $(subst $(comma),$(space),$(call build_field,5))
PC_REQUIRES := $(patsubst requires:%,%,$(filter requires:%,$(call build_field,6)))
PC_LIBS := $(subst $(comma),$(space),$(shell awk -v parts=" $(PARTS_IN) " '$$1 == "build" { \
  n = split($$2, p, ","); for (i = 1; i <= n; i++) if (index(parts, " " p[i] " ")) { \
  if ($$6 == "libs") print $$5; break } }' $(DEPS_FILE)))
TEST_DEB_PACKAGES := $(shell awk '$$1 == "test" { print $$3 }' $(DEPS_FILE))

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
  SAN := -fsanitize=thread
  OUT := build/tsan
  LIB_OUT := $(OUT)/lib
  BIN_OUT := $(OUT)/bin
else
  $(error VARIANT must be release, asan or tsan)
endif

# A library without some part is built apart (never mixed with the full one).
ifneq ($(LEFT_OUT),)
  OUT := $(OUT)-without-$(subst $(space),-,$(LEFT_OUT))
  LIB_OUT := $(OUT)/lib
  BIN_OUT := $(OUT)/bin
  BASE_CFLAGS += -DELASTIC_LEFT_OUT='"$(strip $(foreach p,$(LEFT_OUT),$(FEATURES_$(p))))"' \
    $(foreach p,$(LEFT_OUT),$(CFLAGS_$(p)))
endif

CFLAGS_ALL := $(BASE_CFLAGS) $(OPT) $(SAN) $(CFLAGS)
LDFLAGS_ALL := $(SAN) $(LDFLAGS)

LIB_SRC := $(filter-out src/without/% $(foreach p,$(LEFT_OUT),$(SRC_$(p))),$(sort $(wildcard src/*/*.c))) \
  $(sort $(foreach p,$(LEFT_OUT),$(wildcard src/without/$(p)*.c)))
LIB_OBJ := $(patsubst %.c,$(OUT)/%.o,$(LIB_SRC))
STATIC_LIB := $(LIB_OUT)/libelastic.a
SHARED_LIB := $(LIB_OUT)/libelastic.so.$(VERSION)
SONAME := libelastic.so.$(VERSION_MAJOR)

# elasticrun is the agent; elasticctl reads what agents write.
TOOL_SRC := $(if $(filter agent,$(LEFT_OUT)),,$(sort $(wildcard tools/*.c)))
TOOLS := $(patsubst tools/%.c,$(BIN_OUT)/%,$(TOOL_SRC))

# Tests: test/unit (in the test's own process), test/integration (start processes:
# elasticrun, helpers, etcd), test/support (the fixtures and harnesses they share).
TEST_SRC_ALL := $(sort $(wildcard test/unit/*.c test/integration/*.c test/support/*.c)) test/runner.c
TEST_SRC := $(filter-out $(foreach p,$(LEFT_OUT),$(TESTS_NEED_$(p))),$(TEST_SRC_ALL))
TEST_OBJ := $(patsubst %.c,$(OUT)/%.o,$(TEST_SRC))
TEST_BIN := $(OUT)/test/run_tests
# Helper programs the integration tests start (test/helpers/<name>.c -> one binary each).
HELPER_SRC := $(sort $(wildcard test/helpers/*.c))
HELPERS := $(patsubst test/helpers/%.c,$(OUT)/test/helpers/%,$(HELPER_SRC))

# A test double of NCCL and the CUDA runtime (tests only): loaded through ELASTIC_NCCL_LIBRARY.
NCCL_DOUBLE := $(OUT)/test/libnccl_double.so
# A test double of NVML (the health checks' GPUs, set by a state file): loaded through ELASTIC_NVML_LIBRARY.
NVML_DOUBLE := $(OUT)/test/libnvml_double.so

# test/abi: programs built against the shared library. old_caller uses a shorter
# snapshot of the public structs (an older caller); layout prints the C offsets
# the Python binding's ctypes mirrors are checked against.
ABI_SRC := $(sort $(wildcard test/abi/*.c))
ABI_PROGRAMS := $(patsubst test/abi/%.c,$(OUT)/test/abi/%,$(ABI_SRC))

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

.PHONY: all lib deps deps-build deps-present deps-test print-build test check tsan valgrind fuzz bench soak chaos demo install uninstall wheel clean header-check

all: deps-present $(SHARED_LIB) $(STATIC_LIB) $(TOOLS) $(EXAMPLES)
lib: deps-present $(SHARED_LIB) $(STATIC_LIB)

# ---- dependencies (deps/debian.txt) ----------------------------------------

# The install line; apt-get update only when installing without it failed.
APT_INSTALL = (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1) >/dev/null 2>&1 || \
  (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
   apt-get install -y -q --no-install-recommends $(1) >/dev/null))
AS_ROOT = [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1

# Building and installing never run apt: they only name what is missing.
deps-present:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="pkg-config"; \
	for m in $(PKG_MODULES); do pkg-config --exists $$m 2>/dev/null || missing="$$missing $$m"; done; \
	if [ -n "$$missing" ]; then echo "missing:$$missing. Run make deps (as root) or apt-get install $(DEB_PACKAGES)"; exit 1; fi

# The build libraries: installed as root, else the command is printed and the build stops.
deps-build:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="pkg-config"; \
	for m in $(PKG_MODULES); do pkg-config --exists $$m 2>/dev/null || missing="$$missing $$m"; done; \
	if [ -n "$$missing" ]; then \
	  if $(AS_ROOT); then \
	    echo "deps: installing $(DEB_PACKAGES) (missing:$$missing)"; \
	    $(call APT_INSTALL,$(DEB_PACKAGES)) || exit 1; \
	  else \
	    echo "deps: missing$$missing. Run as root: apt-get install $(DEB_PACKAGES)"; exit 1; \
	  fi; \
	fi

# What the tests use: installed as root; otherwise one line says how, and the
# suite runs what it can (each test that needs a missing one says so as a skip).
deps-test:
	@command -v dpkg-query >/dev/null 2>&1 || { echo "deps: not Debian: the tests use (Debian names) $(TEST_DEB_PACKAGES)"; exit 0; }; \
	missing=""; \
	for p in $(TEST_DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; done; \
	[ -z "$$missing" ] && exit 0; \
	if $(AS_ROOT); then \
	  echo "deps: installing what the tests use:$$missing"; \
	  $(call APT_INSTALL,$$missing) || { echo "deps: apt-get install$$missing failed; the tests that need them will be skipped"; exit 0; }; \
	else \
	  echo "deps: the tests that need them will be skipped. Run as root: apt-get install$$missing"; \
	fi

deps: deps-build deps-test

# What this configuration builds and links (the knob test reads it).
print-build:
	@echo "left_out=$(LEFT_OUT)"; echo "out=$(OUT)"; echo "lib_out=$(LIB_OUT)"; echo "libs=$(LIBS)"; \
	echo "dropped_libs=$(filter-out $(LIBS),$(subst $(comma),$(space),$(shell awk '$$1 == "build" { print $$5 }' $(DEPS_FILE))))"; \
	echo "packages=$(DEB_PACKAGES)"; echo "test_packages=$(TEST_DEB_PACKAGES)"

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

# elasticctl links the shared library and, like every tool, its main file is
# compiled without -Isrc: it uses only the public API. Its own code (status page, event-log
# timeline) is in tools/elasticctl/, which also compiles in the pure readers it
# shares with the library (JSON, text, HTTP GET, Prometheus lines); their
# elastic__fail is tools/elasticctl/fail.c (the library's copy is hidden).
CTL_SRC := $(sort $(wildcard tools/elasticctl/*.c)) src/common/json.c src/common/text.c \
  src/common/json_writer.c src/common/http_client.c src/common/conn.c src/common/promparse.c src/common/parse_int.c src/common/endpoint.c \
  src/common/goodput.c src/common/failure_class.c src/common/failure_policy.c
CTL_OBJ := $(patsubst %.c,$(OUT)/ctl/%.o,$(CTL_SRC))
PUBLIC_CFLAGS = $(filter-out -DELASTIC_BUILDING -Isrc,$(CFLAGS_ALL))

$(OUT)/ctl/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itools -include elasticctl/private.h -MMD -MP -c $< -o $@

# Every tool's main file sees only the public API (no -Isrc).
$(OUT)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(PUBLIC_CFLAGS) -Itools -MMD -MP -c $< -o $@

$(BIN_OUT)/elasticctl: $(OUT)/tools/elasticctl.o $(CTL_OBJ) $(SHARED_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(OUT)/tools/elasticctl.o $(CTL_OBJ) \
	  -L$(LIB_OUT) -Wl,-rpath,'$$ORIGIN/../lib' -lelastic -ljson-c -lm

$(OUT)/examples/%: $(OUT)/examples/c/%.o $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(STATIC_LIB) $(LIBS)

$(OUT)/examples/nccl_trainer: examples/cpp/nccl_trainer.cu examples/cpp/elastic.hpp $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 $(NVCC_ARCH) -cudart shared -Iinclude -Iexamples/cpp -o $@ $< $(STATIC_LIB) \
	  -L$(CUDA_HOME)/lib64 -Xlinker -rpath=$(CUDA_HOME)/lib64 -lnccl $(LIBS)

# ---- tests ----------------------------------------------------------------

$(TEST_OBJ) $(HELPERS:%=%.o): CFLAGS_ALL += -Itest -Itools -DELASTIC_TEST_HOOKS

# Test-only hooks (ckpt__inject_fault) are compiled only with
# -DELASTIC_TEST_HOOKS: the files that have one are built a second time into
# the tests' own archive, so lib/ (what ships) never contains them.
HOOK_SRC := $(shell grep -l ELASTIC_TEST_HOOKS $(LIB_SRC))
HOOK_OBJ := $(patsubst %.c,$(OUT)/hooks/%.o,$(HOOK_SRC))
TEST_LIB := $(OUT)/test/libelastic_test.a

$(OUT)/hooks/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DELASTIC_TEST_HOOKS -MMD -MP -c $< -o $@

$(TEST_LIB): $(filter-out $(patsubst %.c,$(OUT)/%.o,$(HOOK_SRC)),$(LIB_OBJ)) $(HOOK_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The suite also checks elasticctl's status table, its goodput report (over the
# library's accounting, src/common/goodput.c) and its simulator (its own code).
CTL_TESTED_OBJ := $(OUT)/ctl/tools/elasticctl/status.o $(OUT)/ctl/tools/elasticctl/goodput.o \
  $(OUT)/ctl/tools/elasticctl/goodput_text.o $(OUT)/ctl/tools/elasticctl/goodput_svg.o \
  $(OUT)/ctl/tools/elasticctl/timeline_load.o $(OUT)/ctl/tools/elasticctl/simulate.o \
  $(OUT)/ctl/tools/elasticctl/simulate_profile.o $(OUT)/ctl/tools/elasticctl/simulate_defaults.o \
  $(OUT)/ctl/tools/elasticctl/jsonl.o $(OUT)/ctl/tools/elasticctl/explain_load.o \
  $(OUT)/ctl/tools/elasticctl/explain_text.o $(OUT)/ctl/tools/elasticctl/goodput_classes.o

$(TEST_BIN): $(TEST_OBJ) $(CTL_TESTED_OBJ) $(TEST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TEST_OBJ) $(CTL_TESTED_OBJ) $(TEST_LIB) $(LIBS)

$(OUT)/test/helpers/%: $(OUT)/test/helpers/%.o $(TEST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(TEST_LIB) $(LIBS)

# The power-cut tests' FUSE file system (test/powercut/README.md). Built by
# the test target's recipe, so after `deps` installed libfuse3-dev
# (deps/debian.txt); without it the power-cut test skips, naming the package.
$(OUT)/test/helpers/crashfs: test/powercut/crashfs.c
	@mkdir -p $(dir $@)
	@flags="$$(pkg-config --cflags --libs fuse3 2>/dev/null)"; \
	if [ -z "$$flags" ]; then echo "crashfs: no libfuse3-dev (pkg-config fuse3): the power-cut test will skip"; \
	else echo "$(CC) ... -o $@ $< $$flags"; \
	  $(CC) -std=c11 -g -D_GNU_SOURCE $(OPT) $(SAN) $(WARNINGS) -o $@ $< $$flags; fi

$(NCCL_DOUBLE): test/nccl_double/nccl_double.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -fPIC -shared -D_GNU_SOURCE $(OPT) $(SAN) $(WARNINGS) -Wno-missing-prototypes -o $@ $< -lpthread

$(NVML_DOUBLE): test/nvml_double/nvml_double.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -g -fPIC -shared -D_GNU_SOURCE $(OPT) $(SAN) $(WARNINGS) -Wno-missing-prototypes -o $@ $< -lpthread

$(OUT)/test/abi/%: test/abi/%.c $(SHARED_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -DELASTIC_BUILDING -Isrc,$(CFLAGS_ALL)) -Itest/abi -MMD -MP $(LDFLAGS_ALL) -o $@ $< \
	  -L$(LIB_OUT) -Wl,-rpath,$(abspath $(LIB_OUT)) -lelastic

# The public header must stand alone in strict C99 and in C++, and so must
# each module header included first and alone.
# One style for every C file (.clang-format); `make format` rewrites them in place.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null | grep -v '^bindings/rust')
.PHONY: format
format:
	clang-format -i $(FORMAT_FILES)

header-check: deps-present
	@mkdir -p $(OUT)/header
	$(CC) -std=c99 -pedantic -Werror -Wall -Wextra -Iinclude -fsyntax-only test/header/header_c99.c
	$(CXX) -std=c++11 -pedantic -Werror -Wall -Wextra -Iinclude -fsyntax-only -x c++ test/header/header_c99.c
	@for h in include/elastic/*.h; do \
	  printf '#include "%s"\nint main(void) { return elastic_version() == 0; }\n' "$$h" > $(OUT)/header/alone.c || exit 1; \
	  $(CC) -std=c99 -pedantic -Werror -Wall -Wextra -I. -fsyntax-only $(OUT)/header/alone.c || { echo "header-check: $$h does not stand alone (C99)"; exit 1; }; \
	  $(CXX) -std=c++11 -pedantic -Werror -Wall -Wextra -I. -fsyntax-only -x c++ $(OUT)/header/alone.c || { echo "header-check: $$h does not stand alone (C++)"; exit 1; }; \
	done; echo "header-check: each of include/elastic/*.h stands alone"
	@awk -f test/header/documented.awk include/elastic.h include/elastic/*.h && \
	  echo "header-check: every public function has its comment"
	@if [ -f "$(CUDA_HOME)/include/nccl.h" ]; then echo "header-check: src/nccl/nccl.h against $(CUDA_HOME)/include/nccl.h"; \
	  $(CC) -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$(CUDA_HOME)/include -fsyntax-only test/header/nccl_layout.c; fi
	@if [ -f "$(CUDA_HOME)/include/nvml.h" ]; then echo "header-check: src/health/nvml.h against $(CUDA_HOME)/include/nvml.h"; \
	  $(CC) -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$(CUDA_HOME)/include -fsyntax-only test/header/nvml_layout.c; fi

# The suite, the demo and the benchmarks need the agent; a build without it
# is checked by test/integration/test_build_knobs.c instead. (Without etcd the
# suite runs: the tests that need etcd are not built.)
.PHONY: whole-library
whole-library:
	@if [ -n "$(filter $(SUITE_NEEDS),$(LEFT_OUT))" ]; then echo "this build leaves out: $(LEFT_OUT); the suite, the demo and the benchmarks need the agent (build this one with make lib, install it with make install)"; exit 1; fi

# TEST_FILTER selects tests; it is passed to the runner (test/runner.c) as its
# arguments. Every test's name starts with its module (store_, rdzv_, ckpt_,
# common_, agent_, ...), so TEST_FILTER=common runs the common tests. A word is
# a substring, =NAME (or --exact NAME) one test by its exact name, and --list
# prints the selected names instead of running them:
#   make test TEST_FILTER=store            every test whose name contains "store"
#   make test TEST_FILTER="rdzv_etcd ckpt_async"
#   make test TEST_FILTER==store_wait_times_out
#   build/release/test/run_tests --list    every test's name, one per line
# TEST_JOBS=N runs up to N tests at once (the runner's -j; default 4 per CPU, at
# most 16: the suite mostly waits on processes, sockets and deadlines); tests
# declared TEST_ALONE run with nothing beside them (test/test.h). The sanitizer
# suites default to SANITIZER_TEST_JOBS each (their tests use more CPU, and CI
# runs the two side by side).
TEST_JOBS ?=
SANITIZER_TEST_JOBS ?= 4
test: whole-library deps all header-check $(TEST_BIN) $(HELPERS) $(TOOLS) $(EXAMPLES) $(ABI_PROGRAMS) $(NCCL_DOUBLE) $(NVML_DOUBLE)
	@$(MAKE) --no-print-directory $(OUT)/test/helpers/crashfs
	ELASTIC_BIN_DIR=$(abspath $(BIN_OUT)) ELASTIC_LIB_DIR=$(abspath $(LIB_OUT)) ELASTIC_ABI_DIR=$(abspath $(OUT)/test/abi) \
	ELASTIC_NCCL_DOUBLE=$(abspath $(NCCL_DOUBLE)) ELASTIC_NVML_DOUBLE=$(abspath $(NVML_DOUBLE)) \
	ELASTIC_HELPER_DIR=$(abspath $(OUT)/test/helpers) ELASTIC_EXAMPLE_DIR=$(abspath $(OUT)/examples) \
	ELASTIC_SOURCE_DIR=$(CURDIR) \
	  $(TEST_BIN) $(if $(TEST_JOBS),-j $(TEST_JOBS)) $(TEST_FILTER)

# Deadlines scale 2x under ASan+UBSan (about 2x slower), as they do under TSan.
check:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ELASTIC_TEST_TIMEOUT_SCALE=$${ELASTIC_TEST_TIMEOUT_SCALE:-2} $(MAKE) VARIANT=asan test \
	  TEST_JOBS=$(or $(TEST_JOBS),$(SANITIZER_TEST_JOBS))

# Every process of the suite (tests, elasticrun, helpers) writes its TSan
# reports under build/tsan/reports: a race in a child whose exit code a test
# does not check still fails the target. Deadlines scale 3x (TSan is 5-15x
# slower; the waits are bounds, not durations). No suppressions: every report
# so far was fixed at its cause (docs/ARCHITECTURE.md, "Thread safety").
TSAN_REPORTS := $(abspath build/tsan/reports)
tsan:
	@rm -rf $(TSAN_REPORTS) && mkdir -p $(TSAN_REPORTS)
	TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$(TSAN_REPORTS)/report" \
	  ELASTIC_TEST_TIMEOUT_SCALE=$${ELASTIC_TEST_TIMEOUT_SCALE:-3} $(MAKE) VARIANT=tsan test \
	  TEST_JOBS=$(or $(TEST_JOBS),$(SANITIZER_TEST_JOBS)); rc=$$?; \
	  if ls $(TSAN_REPORTS)/report.* >/dev/null 2>&1; then cat $(TSAN_REPORTS)/report.*; \
	    echo "tsan: ThreadSanitizer reports above (one file per process in $(TSAN_REPORTS))"; exit 1; fi; \
	  exit $$rc

valgrind: whole-library all $(TEST_BIN) $(HELPERS) $(NCCL_DOUBLE) $(NVML_DOUBLE)
	ELASTIC_BIN_DIR=$(abspath $(BIN_OUT)) ELASTIC_LIB_DIR=$(abspath $(LIB_OUT)) ELASTIC_NCCL_DOUBLE=$(abspath $(NCCL_DOUBLE)) \
	ELASTIC_NVML_DOUBLE=$(abspath $(NVML_DOUBLE)) \
	ELASTIC_HELPER_DIR=$(abspath $(OUT)/test/helpers) ELASTIC_EXAMPLE_DIR=$(abspath $(OUT)/examples) \
	ELASTIC_SOURCE_DIR=$(CURDIR) ELASTIC_TEST_TIMEOUT_SCALE=10 \
	  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
	  --trace-children=no $(TEST_BIN) -j $(or $(TEST_JOBS),1) $(TEST_FILTER)

# ---- fuzzing (clang + libFuzzer) ------------------------------------------

# The library is compiled once with coverage + sanitizers into an archive that
# every target links (compiling it per target cost minutes on 2 cores).
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address,undefined -D_GNU_SOURCE -DELASTIC_BUILDING -Iinclude -Isrc
FUZZ_OBJ := $(patsubst %.c,build/fuzz/obj/%.o,$(LIB_SRC))
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

build/fuzz/libelastic_fuzz.a: $(FUZZ_OBJ)
	rm -f $@ && ar rcs $@ $^

build/fuzz/%: test/fuzz/%.c build/fuzz/libelastic_fuzz.a
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< build/fuzz/libelastic_fuzz.a $(LIBS)

fuzz: deps-present $(FUZZERS)
	@for f in $(FUZZERS); do echo "fuzz: $$f for $(FUZZ_SECONDS)s"; \
	  mkdir -p build/fuzz/corpus/$$(basename $$f); \
	  $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 build/fuzz/corpus/$$(basename $$f) || exit 1; done

# ---- soak -----------------------------------------------------------------

SOAK_KILLS ?= 3000
SOAK_POWERCUTS ?= 20000
soak:
	ELASTIC_CKPT_KILLS=$(SOAK_KILLS) ELASTIC_TEST_TIMEOUT_SCALE=50 $(MAKE) test TEST_FILTER=ckpt_survives_sigkill
	ELASTIC_POWERCUT_CUTS=$(SOAK_POWERCUTS) ELASTIC_TEST_TIMEOUT_SCALE=50 $(MAKE) test TEST_FILTER=survives_power_cuts

# ---- chaos ----------------------------------------------------------------

# CHAOS_MINUTES (default 5) of jobs under random overlapping faults; a failing
# schedule re-runs from the CHAOS_SEED it prints. Needs root, ip, iptables, etcd.
CHAOS_MINUTES ?= 5
chaos: whole-library deps-build all
	CHAOS_MINUTES=$(CHAOS_MINUTES) $(if $(CHAOS_SEED),CHAOS_SEED=$(CHAOS_SEED)) \
	  ELASTIC_BIN_DIR=$(abspath $(BIN_OUT)) ELASTIC_EXAMPLE_DIR=$(abspath $(OUT)/examples) bash test/chaos/chaos.sh

# ---- benchmarks -----------------------------------------------------------

build/release/bench/%: bench/%.c lib/libelastic.a
	@$(MAKE) --no-print-directory VARIANT=release all
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $< lib/libelastic.a $(LIBS)

# The benchmarks compare the whole library with its peers (lib/, bin/).
bench: whole-library all $(BENCHES)
	@if [ -n "$(LEFT_OUT)" ]; then echo "bench: this build leaves out $(LEFT_OUT); the benchmarks run the whole library"; exit 1; fi
	@for script in bench/run_*.sh; do [ -e "$$script" ] || continue; echo "== $$script"; \
	  ELASTIC_BENCH_DIR=$(abspath build/release/bench) ELASTIC_BIN_DIR=$(abspath bin) bash $$script || exit 1; done

# ---- demo -----------------------------------------------------------------

# TRAINER=c (default) or rust: which build of the demo trainer runs.
TRAINER ?= c
# The C demo needs only the build libraries; the Rust one also cargo and the crates.
demo: whole-library $(if $(filter rust,$(TRAINER)),deps,deps-build) all
	@case "$(TRAINER)" in c) trainer=$(abspath $(OUT)/examples/demo_trainer);; \
	  rust) ($(CARGO_ENV) $(CARGO) build --offline -q -p elastic-demo-trainer) || exit 1; \
	    trainer=$(abspath $(RUST_TARGET_DIR))/debug/demo_trainer;; \
	  *) echo "demo: TRAINER must be c or rust"; exit 1;; esac; \
	  ELASTIC_BIN_DIR=$(abspath $(BIN_OUT)) DEMO_TRAINER=$$trainer bash examples/demo.sh

# ---- Rust bindings (bindings/rust, examples/rust) --------------------------

# One cargo target directory for every variant: only elastic-sys relinks when
# ELASTIC_LIB_DIR changes; bindgen and its dependencies build once.
CARGO ?= cargo
RUST_TARGET_DIR := build/rust
CARGO_ENV = cd bindings/rust && CARGO_TARGET_DIR=$(abspath $(RUST_TARGET_DIR)) ELASTIC_LIB_DIR=$(abspath $(LIB_OUT))

# ---- install --------------------------------------------------------------

# The .pc names the install paths: rebuilt whenever PREFIX/LIBDIR/INCLUDEDIR
# differ from the last build's (the stamp is rewritten only when they change).
PC_VARS := $(PREFIX)|$(LIBDIR)|$(INCLUDEDIR)|$(VERSION)|$(PC_REQUIRES)|$(PC_LIBS)
build/pc-vars: FORCE
	@mkdir -p build
	@[ "$$(cat $@ 2>/dev/null)" = '$(PC_VARS)' ] || printf '%s\n' '$(PC_VARS)' > $@

pkgconfig/elastic.pc: pkgconfig/elastic.pc.in build/pc-vars
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' -e 's|@REQUIRES_PRIVATE@|$(PC_REQUIRES)|g' \
	  -e 's|@LIBS_PRIVATE@|$(PC_LIBS)|g' $< > $@

install: all pkgconfig/elastic.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/elastic $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/elastic.h $(DESTDIR)$(INCLUDEDIR)/elastic.h
	@# A build without a part installs no program that needs it (TOOLS and the Python package).
	install -m 644 include/elastic/*.h $(DESTDIR)$(INCLUDEDIR)/elastic/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libelastic.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libelastic.so
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/
	install -m 644 pkgconfig/elastic.pc $(DESTDIR)$(PKGCONFIGDIR)/elastic.pc
	for t in $(TOOLS); do install -m 755 $$t $(DESTDIR)$(BINDIR)/; done
	@# The Python package, told where the library went (ELASTIC_LIB_DIR still overrides).
	install -d $(DESTDIR)$(PYTHONDIR)/elastic
	install -m 644 bindings/python/elastic/*.py bindings/python/elastic/py.typed $(DESTDIR)$(PYTHONDIR)/elastic/
	printf '"""Written by make install: the library this package loads by default."""\nLIBRARY = "%s"\n' \
	  '$(LIBDIR)/$(SONAME)' > $(DESTDIR)$(PYTHONDIR)/elastic/_installed.py

# A self-contained wheel in dist/ (tools/build_wheel.py, the standard library
# only): the package, the shared library inside it, elasticrun and elasticctl
# as its scripts; `pip install --no-index dist/libelastic-*.whl` needs no
# make install and no ELASTIC_LIB_DIR.
wheel: all
	python3 tools/build_wheel.py --lib $(SHARED_LIB) --bin $(BIN_OUT) --out dist

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/elastic.h $(DESTDIR)$(LIBDIR)/libelastic.so* $(DESTDIR)$(LIBDIR)/libelastic.a
	rm -rf $(DESTDIR)$(INCLUDEDIR)/elastic
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/elastic.pc
	for t in $(notdir $(TOOLS)); do rm -f $(DESTDIR)$(BINDIR)/$$t; done
	rm -rf $(DESTDIR)$(PYTHONDIR)/elastic

FORCE:

clean:
	rm -rf build lib bin pkgconfig/elastic.pc

# Header dependencies of every object (library, tests, tools, examples,
# helpers); their objects are kept so an edited header rebuilds what uses it.
TOOL_OBJ := $(patsubst tools/%.c,$(OUT)/tools/%.o,$(TOOL_SRC))
EXAMPLE_OBJ := $(patsubst examples/c/%.c,$(OUT)/examples/c/%.o,$(EXAMPLE_SRC))
HELPER_OBJ := $(HELPERS:%=%.o)
.SECONDARY: $(TOOL_OBJ) $(EXAMPLE_OBJ) $(HELPER_OBJ) $(CTL_OBJ)
-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(ABI_PROGRAMS:=.d) $(TOOL_OBJ:.o=.d) $(EXAMPLE_OBJ:.o=.d) $(HELPER_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d) $(CTL_OBJ:.o=.d) $(HOOK_OBJ:.o=.d)
