/*
 * Pull requests out, CI and review back in (docs/forge.md): a stand-in
 * so that a sync round links until h-fpr's pr.c replaces this file.
 */
#include "util/compat.h"

#include "forge/forge_int.h"

int
forge__pulls(struct forge_ctx *fx, struct err *e)
{
	(void)fx;
	(void)e;
	return 0;
}
