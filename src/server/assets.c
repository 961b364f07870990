/*
 * The dashboard's files, compiled into the binary (tools/embed.sh): no
 * Node and no files on disk at run time. They hold no data, so they need
 * no token; the page asks for it and sends it with every API call. The
 * Content-Security-Policy lets the page run only its own script and
 * talk only to this server, so even a bug that put agent text into the
 * page as markup could not run it.
 */
#include "util/compat.h"

#include "server/server_int.h"
#include "util/embed.h"

static const struct {
	const char *path, *file, *type;
} assets[] = {
	{ "/", "index.html", "text/html; charset=utf-8" },
	{ "/index.html", "index.html", "text/html; charset=utf-8" },
	{ "/app.js", "app.js", "text/javascript; charset=utf-8" },
	{ "/app.css", "app.css", "text/css; charset=utf-8" },
};

int
assets_serve(struct req *rq)
{
	size_t i;
	const char *text;

	if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD"))
		return 0;
	for (i = 0; i < ARRAY_SIZE(assets); i++) {
		if (strcmp(rq->path, assets[i].path))
			continue;
		text = embed_get(assets[i].file);
		if (!text)
			return 0;
		http_page(rq, assets[i].type, text, strlen(text));
		return 1;
	}
	return 0;
}
