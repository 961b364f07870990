/*
 * Lookup in the table tools/embed.sh generates.
 */
#include "util/compat.h"

#include "util/embed.h"

const char *
embed_get(const char *name)
{
	const struct embedded_file *f;

	for (f = embedded_files; f->name; f++)
		if (!strcmp(f->name, name))
			return f->text;
	return NULL;
}
