/*
 * libmicrohttpd on first use (util/lazy.h): only `baton serve` needs it,
 * and with it GnuTLS and the ten libraries that come along. Each function
 * below is defined with the prototype of <microhttpd.h>, so one that
 * differs does not compile. Four are variadic and written out: MHD_start_daemon
 * goes through MHD_start_daemon_va; the other three pass on what the
 * calls baton makes give them (nothing for the connection infos and
 * upgrade actions it asks for, an unsigned int for a connection's
 * timeout, the one connection option there is).
 */
#include "util/compat.h"

#include <microhttpd.h>
#include <stdarg.h>

#include "util/lazy.h"

#define MHD_FUNCTIONS(X, V, H)                                              \
	X(struct MHD_Daemon *, MHD_start_daemon_va,                         \
	  (unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, \
	   void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls,       \
	   va_list ap),                                                     \
	  (flags, port, apc, apc_cls, dh, dh_cls, ap))                      \
	V(MHD_stop_daemon, (struct MHD_Daemon * d), (d))                    \
	X(const char *, MHD_lookup_connection_value,                        \
	  (struct MHD_Connection * c, enum MHD_ValueKind kind,              \
	   const char *key),                                                \
	  (c, kind, key))                                                   \
	X(enum MHD_Result, MHD_queue_response,                              \
	  (struct MHD_Connection * c, unsigned int status,                  \
	   struct MHD_Response *r),                                         \
	  (c, status, r))                                                   \
	V(MHD_suspend_connection, (struct MHD_Connection * c), (c))         \
	V(MHD_resume_connection, (struct MHD_Connection * c), (c))          \
	X(struct MHD_Response *, MHD_create_response_from_buffer,           \
	  (size_t size, void *buffer, enum MHD_ResponseMemoryMode mode),    \
	  (size, buffer, mode))                                             \
	X(struct MHD_Response *, MHD_create_response_from_callback,         \
	  (uint64_t size, size_t block, MHD_ContentReaderCallback crc,      \
	   void *crc_cls, MHD_ContentReaderFreeCallback crfc),              \
	  (size, block, crc, crc_cls, crfc))                                \
	X(struct MHD_Response *, MHD_create_response_for_upgrade,           \
	  (MHD_UpgradeHandler h, void *cls), (h, cls))                      \
	X(enum MHD_Result, MHD_add_response_header,                         \
	  (struct MHD_Response * r, const char *header,                     \
	   const char *content),                                            \
	  (r, header, content))                                             \
	V(MHD_destroy_response, (struct MHD_Response * r), (r))             \
	X(enum MHD_Result, MHD_is_feature_supported,                        \
	  (enum MHD_FEATURE f), (f))                                        \
	H(MHD_get_connection_info)                                          \
	H(MHD_set_connection_option)                                        \
	H(MHD_upgrade_action)

LAZY_LIBRARY(MHD_FUNCTIONS, "libmicrohttpd.so.12", "the HTTP server")

struct MHD_Daemon *
MHD_start_daemon(unsigned int flags, uint16_t port,
		 MHD_AcceptPolicyCallback apc, void *apc_cls,
		 MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *d;
	va_list ap;

	va_start(ap, dh_cls);
	d = MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

/* The infos baton asks for (the socket context, the fd) take no argument. */
const union MHD_ConnectionInfo *
MHD_get_connection_info(struct MHD_Connection *c,
			enum MHD_ConnectionInfoType type, ...)
{
	__typeof__(MHD_get_connection_info) *fn =
		lazy_fn(&lib, LAZY_MHD_get_connection_info);

	return fn(c, type);
}

/* MHD_CONNECTION_OPTION_TIMEOUT, the only option, takes an unsigned int. */
enum MHD_Result
MHD_set_connection_option(struct MHD_Connection *c,
			  enum MHD_CONNECTION_OPTION option, ...)
{
	__typeof__(MHD_set_connection_option) *fn =
		lazy_fn(&lib, LAZY_MHD_set_connection_option);
	enum MHD_Result rc;
	va_list ap;

	va_start(ap, option);
	rc = fn(c, option, va_arg(ap, unsigned int));
	va_end(ap);
	return rc;
}

/* Closing and corking an upgraded connection take no argument. */
enum MHD_Result
MHD_upgrade_action(struct MHD_UpgradeResponseHandle *urh,
		   enum MHD_UpgradeAction action, ...)
{
	__typeof__(MHD_upgrade_action) *fn =
		lazy_fn(&lib, LAZY_MHD_upgrade_action);

	return fn(urh, action);
}

int
lazy_mhd_load(struct err *e)
{
	return lazy_load(&lib, e);
}
