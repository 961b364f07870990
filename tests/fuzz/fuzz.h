/*
 * What every fuzz target shares: the libFuzzer entry point, declared here
 * because libFuzzer does not ship a header for it, and which replay.c
 * calls for each corpus file when the targets are built without libFuzzer.
 */
#ifndef BATON_TESTS_FUZZ_FUZZ_H
#define BATON_TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/*
 * Runs one input through the target. data is borrowed for the call and
 * need not be NUL-terminated. Returns 0; anything wrong is a crash, a
 * sanitizer report or a leak.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
