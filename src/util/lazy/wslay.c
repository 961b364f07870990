/*
 * libwslay on first use (util/lazy.h): the WebSocket frames of `baton
 * serve`. Each function below is defined with the prototype of
 * <wslay/wslay.h>, so one that differs does not compile.
 */
#include "util/compat.h"

#include <wslay/wslay.h>

#include "util/lazy.h"

#define WSLAY_FUNCTIONS(X, V, H)                                            \
	X(int, wslay_event_context_server_init,                             \
	  (wslay_event_context_ptr * ctx,                                   \
	   const struct wslay_event_callbacks *cb, void *user),             \
	  (ctx, cb, user))                                                  \
	V(wslay_event_context_free, (wslay_event_context_ptr ctx), (ctx))   \
	V(wslay_event_config_set_max_recv_msg_length,                       \
	  (wslay_event_context_ptr ctx, uint64_t n), (ctx, n))              \
	X(int, wslay_event_recv, (wslay_event_context_ptr ctx), (ctx))      \
	X(int, wslay_event_send, (wslay_event_context_ptr ctx), (ctx))      \
	X(int, wslay_event_want_read, (wslay_event_context_ptr ctx), (ctx)) \
	X(int, wslay_event_want_write, (wslay_event_context_ptr ctx),       \
	  (ctx))                                                            \
	V(wslay_event_set_error, (wslay_event_context_ptr ctx, int v),      \
	  (ctx, v))                                                         \
	X(int, wslay_event_queue_msg,                                       \
	  (wslay_event_context_ptr ctx, const struct wslay_event_msg *m),   \
	  (ctx, m))                                                         \
	X(int, wslay_event_queue_close,                                     \
	  (wslay_event_context_ptr ctx, uint16_t code, const uint8_t *why,  \
	   size_t len),                                                     \
	  (ctx, code, why, len))                                            \
	X(size_t, wslay_event_get_queued_msg_count,                         \
	  (wslay_event_context_ptr ctx), (ctx))                             \
	X(int, wslay_event_get_write_enabled,                               \
	  (wslay_event_context_ptr ctx), (ctx))

LAZY_LIBRARY(WSLAY_FUNCTIONS, "libwslay.so.1", "WebSocket streams")

int
lazy_wslay_load(struct err *e)
{
	return lazy_load(&lib, e);
}
