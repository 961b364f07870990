/*
 * A WebSocket client for the tests (civetweb's client side): connects to
 * 127.0.0.1:PORT PATH, sends each --send message, prints every text
 * message it receives on a line of its own, and exits after --count
 * messages (or --until a line containing TEXT) or --timeout seconds.
 * Exit status: 0 when the count or text was reached, 1 on timeout, 2
 * when the connection failed (the reason on stderr), 3 when the server
 * closed it first.
 */
#define _GNU_SOURCE
#include <civetweb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int seen, want = -1, done, closed;
static const char *until;

static int
on_data(struct mg_connection *conn, int bits, char *data, size_t len,
	void *arg)
{
	(void)conn;
	(void)arg;
	if ((bits & 0xf) != MG_WEBSOCKET_OPCODE_TEXT)
		return 1;
	pthread_mutex_lock(&mu);
	fwrite(data, 1, len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	seen++;
	if ((want >= 0 && seen >= want) ||
	    (until && memmem(data, len, until, strlen(until))))
		done = 1;
	pthread_mutex_unlock(&mu);
	return 1;
}

static void
on_close(const struct mg_connection *conn, void *arg)
{
	(void)conn;
	(void)arg;
	closed = 1;
}

int
main(int argc, char **argv)
{
	char err[256] = "";
	const char *path = NULL;
	struct mg_connection *c;
	double timeout = 10;
	int port = 0, i, sends = 0, server_closed;
	char *send[32];
	time_t start;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--send") && i + 1 < argc && sends < 32)
			send[sends++] = argv[++i];
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			want = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--until") && i + 1 < argc)
			until = argv[++i];
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atof(argv[++i]);
		else if (!port)
			port = atoi(argv[i]);
		else
			path = argv[i];
	}
	if (!port || !path) {
		fprintf(stderr, "usage: wsclient PORT PATH [--send JSON]... "
				"[--count N] [--until TEXT] [--timeout S]\n");
		return 2;
	}
	mg_init_library(0);
	c = mg_connect_websocket_client("127.0.0.1", port, 0, err, sizeof(err),
					path, NULL, on_data, on_close, NULL);
	if (!c) {
		fprintf(stderr, "wsclient: %s\n", err);
		return 2;
	}
	for (i = 0; i < sends; i++)
		mg_websocket_client_write(c, MG_WEBSOCKET_OPCODE_TEXT, send[i],
					  strlen(send[i]));
	start = time(NULL);
	for (;;) {
		int stop;

		pthread_mutex_lock(&mu);
		stop = done;
		pthread_mutex_unlock(&mu);
		if (stop || closed || difftime(time(NULL), start) >= timeout)
			break;
		usleep(20000);
	}
	/* read before closing: our own close calls on_close too */
	server_closed = closed;
	mg_close_connection(c);
	return done ? 0 : server_closed ? 3 : 1;
}
