# baton: one non-recursive Makefile (STYLE.md section 12).
#
#   make            build ./baton
#   make test       build, then run the unit and integration suites
#   make asan       the same suites against an ASan+UBSan build (build-asan/)
#   make lint       cppcheck and clang-tidy over src/
#   make hdrcheck   every header compiles on its own
#   make format-check
#   make bench      benchmarks under bench/ (figures, never asserted)
#
# Dependencies come from pkg-config: sqlite3, yaml-0.1, jansson.

CC      ?= cc
BUILD   ?= build
BIN     ?= baton
PKGS     = sqlite3 yaml-0.1 jansson

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

WARN    = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
          -Wmissing-prototypes -Wformat=2 -Wvla -Wpointer-arith \
          -Wwrite-strings -Wundef -Wimplicit-fallthrough \
          -Wdeclaration-after-statement -fno-common
OPT     ?= -O2 -D_FORTIFY_SOURCE=2
CFLAGS  ?= -g
CFLAGS  += -std=c17 $(OPT) $(WARN) -fstack-protector-strong \
           -Isrc $(PKG_CFLAGS) -MMD -MP
LDLIBS  += $(PKG_LIBS)

SRC      := $(sort $(wildcard src/*/*.c))
CLI_SRC  := $(filter src/cli/%,$(SRC))
LIB_SRC  := $(filter-out src/cli/%,$(SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/embedded.o
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libbaton.a

UNIT_SRC := $(sort $(wildcard tests/unit/t_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TESTLIB  := $(BUILD)/tests/lib/test.o

SQL      := $(sort $(wildcard src/store/sql/*.sql))
PIPES    := $(sort $(wildcard src/core/pipelines/*.yaml))
TMPLS    := $(sort $(wildcard src/core/prompts/*.md))

.PHONY: all test check asan lint hdrcheck format format-check bench clean

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
# templates. tools/embed.sh turns each file into a C string.
$(BUILD)/gen/embedded.c: tools/embed.sh $(SQL) $(PIPES) $(TMPLS)
	@mkdir -p $(@D)
	sh tools/embed.sh $(SQL) $(PIPES) $(TMPLS) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/embedded.o: $(BUILD)/gen/embedded.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/lib/test.o: tests/lib/test.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/lib -c -o $@ $<

$(BUILD)/tests/t_%: tests/unit/t_%.c $(TESTLIB) $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -Itests/lib -o $@ $< $(TESTLIB) $(LIB) $(LDLIBS)

units: $(UNIT_BIN)

test check: $(BIN) $(UNIT_BIN)
	BATON_BIN=$(abspath $(BIN)) UNIT_DIR=$(abspath $(BUILD)/tests) \
		sh tests/run.sh

asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/baton \
		OPT="-O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		LDFLAGS="-fsanitize=address,undefined" test

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr --suppress=missingIncludeSystem \
		--suppress=varFuncNullUB -Isrc src
	clang-tidy --quiet $(LIB_SRC) $(CLI_SRC) -- -std=c17 -Isrc $(PKG_CFLAGS)

hdrcheck:
	@set -e; for h in $$(find src -name '*.h'); do \
		printf '#include "%s"\n' "$${h#src/}" | \
		$(CC) -std=c17 $(WARN) -Isrc $(PKG_CFLAGS) -fsyntax-only -x c - ; \
	done; echo "headers ok"

format:
	clang-format -i $$(find src tests -name '*.[ch]')

format-check:
	clang-format --dry-run --Werror $$(find src tests -name '*.[ch]')

bench: $(BIN)
	BATON_BIN=$(abspath $(BIN)) sh bench/run.sh

clean:
	rm -rf build build-asan $(BIN)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
