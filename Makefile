# baton: one non-recursive Makefile (STYLE.md section 12).
#
#   make            build ./baton
#   make test       build, then run the unit and integration suites
#   make asan       the same suites against an ASan+UBSan build (build-asan/)
#   make check      what CI runs: every test once, the PostgreSQL pass's
#                   scripts against the optimized build, all else against
#                   the ASan+UBSan one
#   make lint       cppcheck and clang-tidy over src/
#   make hdrcheck   every header compiles on its own
#   make format-check
#   make bench      benchmarks under bench/ (figures, never asserted)
#   make bench-pg   the task queue on PostgreSQL beside graphile-worker
#                   and pg-boss (bench/bench_pg.sh)
#   make fuzz       libFuzzer targets tests/fuzz/fuzz_*.c, built with clang
#                   and ASan+UBSan into build-fuzz/fuzz/
#   make fuzz-run FUZZ_SECONDS=60
#                   runs each target that long on a copy of its corpus;
#                   new inputs go to build-fuzz/corpus/, crashes to
#                   build-fuzz/crash-*
#
# make test also replays tests/fuzz/corpus/<target>/ through every target
# under gcc (build/tests/t_fuzz_<target>).
#
# Dependencies come from pkg-config: sqlite3, libpq, yaml-0.1, jansson,
# libcurl, libcrypto, libmicrohttpd; libwslay (which ships no .pc file) is
# named by hand. libpq, libcurl, libcrypto, libmicrohttpd and libwslay are
# compiled against but not linked into baton: it opens them on first use
# (src/util/lazy/, LAZY_PKGS below). civetweb (no .pc file either) is only
# for test tools: the WebSocket client and the webhook receiver of t_notify.

CC      ?= cc
BUILD   ?= build
BIN     ?= baton
PKGS     = sqlite3 libpq yaml-0.1 jansson libcurl libcrypto libmicrohttpd

# Loaded on first use, not linked (src/util/lazy/, docs/operations.md):
# their headers are used, their libraries only by what links them
# directly (tests and benchmarks that call libpq or libcurl themselves).
LAZY_PKGS = libpq libcurl libcrypto libmicrohttpd

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(filter-out $(LAZY_PKGS),$(PKGS)))
LAZY_LIBS  := $(shell pkg-config --libs $(LAZY_PKGS)) -lwslay

WARN    = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
          -Wmissing-prototypes -Wformat=2 -Wvla -Wpointer-arith \
          -Wwrite-strings -Wundef -Wimplicit-fallthrough \
          -Wdeclaration-after-statement -fno-common
OPT     ?= -O2 -D_FORTIFY_SOURCE=2
CFLAGS  ?= -g
CFLAGS  += -std=c17 $(OPT) $(WARN) -fstack-protector-strong \
           -Isrc $(PKG_CFLAGS) -MMD -MP
LDLIBS  += $(PKG_LIBS)

SRC      := $(sort $(wildcard src/*/*.c src/*/*/*.c))
CLI_SRC  := $(filter src/cli/%,$(SRC))
LIB_SRC  := $(filter-out src/cli/%,$(SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/embedded.o
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libbaton.a

UNIT_SRC := $(sort $(wildcard tests/unit/t_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TESTLIB  := $(BUILD)/tests/lib/test.o

SQL      := $(sort $(wildcard src/store/sql/*.sql src/store/sql/pg/*.sql))
PIPES    := $(sort $(wildcard src/core/pipelines/*.yaml))
TMPLS    := $(sort $(wildcard src/core/prompts/*.md))
UI       := $(sort $(wildcard src/server/ui/*))

FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES  := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/tests/t_fuzz_%)
FUZZ_BIN    := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/fuzz/fuzz_%)
FUZZ_SECONDS ?= 60
# clang for make fuzz; the library is built again with it in build-fuzz/
FUZZ_CC     ?= clang
FUZZ_SAN     = -fsanitize=address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
# what clang warns about beyond gcc and is no bug: vsnprintf on the format
# of a va_list function (buf_vaddf)
FUZZ_WNO     = -Wno-format-nonliteral

.PHONY: FORCE all test check test-agents-latest asan lint hdrcheck format format-check bench clean \
	fuzz fuzz-bins fuzz-run bench-bins bench-pg

all: $(BIN)

$(BIN): $(CLI_OBJ) $(LIB)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c -o $@ $<

# Text compiled into the binary: migrations, built-in pipelines, prompt
# templates, the dashboard. tools/embed.sh turns each file into a C string.
EMBEDDED := $(SQL) $(PIPES) $(TMPLS) $(UI)

# The names of the embedded files, rewritten only when they change: a
# file removed (a migration taken back) rebuilds embedded.c as one added
# does, which its prerequisites alone cannot tell.
$(BUILD)/gen/embedded.list: FORCE
	@mkdir -p $(@D)
	@echo '$(EMBEDDED)' | cmp -s - $@ || echo '$(EMBEDDED)' > $@

$(BUILD)/gen/embedded.c: tools/embed.sh $(EMBEDDED) $(BUILD)/gen/embedded.list
	@mkdir -p $(@D)
	sh tools/embed.sh $(EMBEDDED) > $@.tmp && mv $@.tmp $@

FORCE:

$(BUILD)/gen/embedded.o: $(BUILD)/gen/embedded.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/lib/test.o: tests/lib/test.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/lib -c -o $@ $<

$(BUILD)/tests/t_%: tests/unit/t_%.c $(TESTLIB) $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -Itests/lib -o $@ $< $(TESTLIB) $(LIB) $(LDLIBS) \
		$(LAZY_LIBS) $(if $(filter %/t_notify,$@),-lcivetweb)

# A fuzz target linked with replay.c instead of libFuzzer: it runs every
# file of tests/fuzz/corpus/<target>/ once, as a unit test binary.
$(FUZZ_REPLAY): $(BUILD)/tests/t_fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o \
		tests/fuzz/replay.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -DFUZZ_TARGET='"$*"' \
		-DCORPUS_DIR='"$(abspath tests/fuzz/corpus)"' -o $@ \
		tests/fuzz/replay.c $< $(LIB) $(LDLIBS)

# The libFuzzer binaries; make fuzz builds them with BUILD=build-fuzz.
$(FUZZ_BIN): $(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB) $(LDLIBS)

# The mock model server the agent tests talk to (tests/mock/).
MOCK     := $(BUILD)/tests/mockllm

$(MOCK): tests/mock/mockllm.c
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LDLIBS)

# A WebSocket client for the live-stream tests.
WSCLIENT := $(BUILD)/tests/wsclient

$(WSCLIENT): tests/mock/wsclient.c
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LDLIBS) -lcivetweb -lpthread

units: $(UNIT_BIN)

test: $(BIN) $(UNIT_BIN) $(FUZZ_REPLAY) $(MOCK) $(WSCLIENT)
	BATON_BIN=$(abspath $(BIN)) UNIT_DIR=$(abspath $(BUILD)/tests) \
		BATON_PG_BIN=$(abspath $(or $(PG_BIN),$(BIN))) \
		MOCKLLM=$(abspath $(MOCK)) WSCLIENT=$(abspath $(WSCLIENT)) \
		sh tests/run.sh

# The agent CLI tests against the newest CLIs (tools/agents.sh --latest)
# instead of the pinned ones (docs/agents.md, "Versions").
AGENT_TESTS := t0011 t0012 t0014 t0017 t0110
LATEST_BIN ?= $(abspath .agents-latest/node_modules/.bin)

test-agents-latest: $(BIN) $(UNIT_BIN) $(FUZZ_REPLAY) $(MOCK) $(WSCLIENT)
	@test -d $(LATEST_BIN) || { echo "no $(LATEST_BIN): run tools/agents.sh --latest" >&2; exit 1; }
	@rc=0; for t in $(AGENT_TESTS); do \
		BATON_TEST_AGENTS_BIN=$(LATEST_BIN) BATON_TEST_REQUIRE_AGENTS=1 \
		BATON_BIN=$(abspath $(BIN)) UNIT_DIR=$(abspath $(BUILD)/tests) \
		MOCKLLM=$(abspath $(MOCK)) WSCLIENT=$(abspath $(WSCLIENT)) \
		T=$$t sh tests/run.sh || rc=1; \
	done; exit $$rc

asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/baton \
		OPT="-O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		LDFLAGS="-fsanitize=address,undefined" test

# Every test once, the way CI can afford it on two CPUs (the suite twice
# over, optimized and sanitized, took more than its 90 minutes): the
# unit tests and the embedded store's pass under the sanitizers, and the
# PostgreSQL pass's scripts, the same scripts again on the other store,
# against the optimized build that users run. The store's conformance
# units run on PostgreSQL under the sanitizers too.
check: $(BIN)
	$(MAKE) asan PG_BIN=$(abspath $(BIN))

fuzz-bins: $(FUZZ_BIN)

fuzz:
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) \
		OPT="-O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN)" \
		WARN="$(WARN) $(FUZZ_WNO)" \
		LDFLAGS="$(FUZZ_SAN)" fuzz-bins

# Seeds are copied so that libFuzzer adds its finds to build-fuzz/corpus/
# and never to the repository; a crash stops the run with its input saved.
fuzz-run: fuzz
	@set -e; for t in $(FUZZ_NAMES); do \
		mkdir -p build-fuzz/corpus/$$t; \
		cp tests/fuzz/corpus/$$t/* build-fuzz/corpus/$$t/; \
		echo "== fuzz_$$t for $(FUZZ_SECONDS)s"; \
		build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
			-print_final_stats=1 \
			-artifact_prefix=build-fuzz/crash-$$t- \
			build-fuzz/corpus/$$t; \
	done

# Both spread over the processors (clang-tidy a few files a process):
# one file at a time, they were minutes of CI's time.
LINT_JOBS ?= $(shell nproc 2>/dev/null || echo 1)

lint:
	cppcheck -j$(LINT_JOBS) --quiet --error-exitcode=1 \
		--enable=warning,performance,portability \
		--inline-suppr --suppress=missingIncludeSystem \
		--suppress=varFuncNullUB -Isrc src
	printf '%s\n' $(LIB_SRC) $(CLI_SRC) | xargs -P$(LINT_JOBS) -n 8 \
		sh -c 'exec clang-tidy --quiet "$$@" -- -std=c17 -Isrc $(PKG_CFLAGS)' lint

hdrcheck:
	@set -e; for h in $$(find src -name '*.h'); do \
		printf '#include "%s"\n' "$${h#src/}" | \
		$(CC) -std=c17 $(WARN) -Isrc $(PKG_CFLAGS) -fsyntax-only -x c - ; \
	done; echo "headers ok"

format:
	clang-format -i $$(find src tests -name '*.[ch]')

format-check:
	clang-format --dry-run --Werror $$(find src tests -name '*.[ch]')

# The C benchmarks: bench/<name>.c with the helpers of bench/bench_util.c,
# against the library. Plain -Wall -Wextra, no -Werror: they are tools.
BENCH_BIN := $(BUILD)/bench/bench_store $(BUILD)/bench/bench_queue \
             $(BUILD)/bench/bench_http $(BUILD)/bench/bench_forge \
             $(BUILD)/bench/bench_stream $(BUILD)/bench/bench_tui

$(BENCH_BIN): $(BUILD)/bench/%: bench/%.c bench/bench_util.c \
		bench/bench_util.h $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) -std=c17 -g -O2 -Wall -Wextra -pthread -Isrc $(PKG_CFLAGS) \
		-o $@ $< bench/bench_util.c $(LIB) $(LDLIBS) $(LAZY_LIBS)

bench-bins: $(BENCH_BIN)

bench: $(BIN) $(BENCH_BIN)
	BATON_BIN=$(abspath $(BIN)) BENCH_BUILD=$(BUILD) sh bench/run.sh

# The queue on PostgreSQL beside graphile-worker and pg-boss (needs a
# PostgreSQL server install, node and npm; about 8 minutes).
bench-pg: $(BUILD)/bench/bench_queue
	BENCH_QUEUE=$(abspath $(BUILD)/bench/bench_queue) BENCH_BUILD=$(BUILD) \
		sh bench/bench_pg.sh

clean:
	rm -rf build build-asan build-fuzz $(BIN)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
