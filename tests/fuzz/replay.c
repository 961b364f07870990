/*
 * Replays a fuzz target's corpus without libFuzzer (sqlite's fuzzcheck),
 * so `make test` and `make asan` run every seed and every past crash
 * through the target under gcc. Linked with one fuzz_<target>.c, which
 * provides LLVMFuzzerTestOneInput; FUZZ_TARGET names that target and
 * CORPUS_DIR is the absolute path of tests/fuzz/corpus.
 *
 *   build/tests/t_fuzz_config            every file in corpus/config/
 *   build/tests/t_fuzz_config FILE|DIR   just those (e.g. a new crash)
 *
 * Output: "ok FILE" per input, then "N passed, N failed" as tests/run.sh
 * expects. An input that crashes the target kills the process before the
 * summary line, which run.sh counts as a failure.
 */
#include "util/compat.h"

#include <dirent.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/strvec.h"

#ifndef FUZZ_TARGET
#error "FUZZ_TARGET must name the target, e.g. -DFUZZ_TARGET='\"config\"'"
#endif
#ifndef CORPUS_DIR
#error "CORPUS_DIR must be the absolute path of tests/fuzz/corpus"
#endif

/* Larger inputs than libFuzzer's -max_len would never be generated. */
#define REPLAY_MAX_INPUT (1024 * 1024)

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Adds path to files: a directory contributes its files (not dotfiles,
 * not subdirectories) in name order. A directory without files is an
 * error, so a corpus that went missing cannot pass by running nothing.
 */
static int
collect(const char *path, struct strvec *files)
{
	struct strvec names = STRVEC_INIT;
	struct dirent *de;
	DIR *d = NULL;
	size_t i;
	int rc = 0;

	if (!fs_is_dir(path)) {
		strvec_push(files, path);
		goto out;
	}
	d = opendir(path);
	if (!d) {
		rc = -errno;
		fprintf(stderr, "FAIL cannot open '%s': %s\n", path,
			strerror(errno));
		goto out;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			strvec_push(&names, de->d_name);
	if (!names.nr) {
		rc = -ENOENT;
		fprintf(stderr, "FAIL no inputs in '%s'\n", path);
		goto out;
	}
	qsort(names.v, names.nr, sizeof(*names.v), cmp_str);
	for (i = 0; i < names.nr; i++)
		strvec_pushf(files, "%s/%s", path, names.v[i]);
out:
	if (d)
		closedir(d);
	strvec_clear(&names);
	return rc;
}

int
main(int argc, char **argv)
{
	struct strvec files = STRVEC_INIT;
	struct buf data = BUF_INIT;
	int i, passed = 0, failed = 0;
	size_t j;

	if (argc < 2) {
		if (collect(CORPUS_DIR "/" FUZZ_TARGET, &files) < 0)
			failed++;
	}
	for (i = 1; i < argc; i++)
		if (collect(argv[i], &files) < 0)
			failed++;
	for (j = 0; j < files.nr; j++) {
		const char *name = strrchr(files.v[j], '/');
		struct err e = ERR_INIT;

		name = name ? name + 1 : files.v[j];
		buf_reset(&data);
		if (fs_read(files.v[j], &data, REPLAY_MAX_INPUT, &e) < 0) {
			printf("FAIL %s: %s\n", name, e.msg);
			failed++;
			continue;
		}
		LLVMFuzzerTestOneInput((const uint8_t *)data.ptr, data.len);
		printf("ok %s\n", name);
		fflush(stdout);
		passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	buf_release(&data);
	strvec_clear(&files);
	return failed ? 1 : 0;
}
