/*
 * Loading a shared library on first use (lazy.h): dlopen, dlsym of every
 * function at once (so a library that lacks one fails on the first call,
 * not in the middle of some later one), and the error that says which
 * feature needs which library.
 */
#include "util/compat.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/lazy.h"

void
lazy_open(struct lazy_lib *lib)
{
	void *h;
	size_t i;

	/* RTLD_LOCAL: its symbols stay out of the global scope, where
	 * they would interpose on the trampolines' names. */
	h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(lib->msg, sizeof(lib->msg), "%s needs %s: %s",
			 lib->feature, lib->soname, dlerror());
		return;
	}
	for (i = 0; i < lib->nr; i++) {
		lib->fns[i] = dlsym(h, lib->names[i]);
		if (!lib->fns[i]) {
			snprintf(lib->msg, sizeof(lib->msg),
				 "%s needs %s with %s: %s", lib->feature,
				 lib->soname, lib->names[i], dlerror());
			return; /* the handle stays: nothing is half-used */
		}
	}
}

int
lazy_load(struct lazy_lib *lib, struct err *e)
{
	/* After the first call, one atomic read (pthread_once), which
	 * also orders the reads of lib->fns after their writes. */
	pthread_once(&lib->once, lib->init);
	if (lib->msg[0])
		return err_set(e, BATON_ENOTFOUND, "%s", lib->msg);
	return 0;
}

void *
lazy_fn(struct lazy_lib *lib, size_t i)
{
	if (lazy_load(lib, NULL) < 0) {
		fprintf(stderr, "baton: %s\n", lib->msg);
		exit(EXIT_FAILURE);
	}
	return lib->fns[i];
}
