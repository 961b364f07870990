/* Placeholder until the webhook deliverer lands (see server_int.h). */
#include "util/compat.h"

#include "server/server_int.h"

struct notifier *
notify_start(const struct config *cfg, const struct workspace *ws,
	     const char *store_spec, struct err *e)
{
	(void)cfg;
	(void)ws;
	(void)store_spec;
	(void)e;
	return NULL;
}

void
notify_poke(struct notifier *n)
{
	(void)n;
}

void
notify_stop(struct notifier *n)
{
	(void)n;
}
