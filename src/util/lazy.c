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

/* The library being loaded by pthread_once, which passes no argument. */
static struct lazy_lib *loading;
static pthread_mutex_t loading_lock = PTHREAD_MUTEX_INITIALIZER;

static void
load(void)
{
	struct lazy_lib *lib = loading;
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
	/* One library at a time goes through the once; each has its own
	 * once, so a loaded library costs a read of it and no lock. */
	pthread_mutex_lock(&loading_lock);
	loading = lib;
	pthread_once(&lib->once, load);
	loading = NULL;
	pthread_mutex_unlock(&loading_lock);
	if (lib->msg[0])
		return err_set(e, BATON_ENOTFOUND, "%s", lib->msg);
	return 0;
}

void *
lazy_fn(struct lazy_lib *lib, size_t i)
{
	if (!lib->fns[i] && lazy_load(lib, NULL) < 0) {
		fprintf(stderr, "baton: %s\n", lib->msg);
		exit(EXIT_FAILURE);
	}
	return lib->fns[i];
}
