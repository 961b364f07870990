#!/usr/bin/env python3
"""Many live-stream clients in one process, one selectors loop.

streams.py PORT TOKEN N MODE READY OUT [--from TEXT] [--until TEXT]
           [--timeout S]

Opens N clients of MODE (sse: GET /api/v1/events; ws: a WebSocket at
/api/v1/ws) to 127.0.0.1:PORT, all at once, non-blocking. Once every
client has its answer's head (200, or 101 for ws), writes "ready N" to
the file READY. Each client then collects the seq of every event it is
sent, in order, until it has seen one whose data holds TEXT (or, without
--until, until the timeout). With --from, a client's list starts at the
first event whose data holds that TEXT (send it once every client is
ready: from then on each is owed every event; before, one that connected
later starts later); a client that never saw it is not done. At the end
OUT gets, one per line:

    heads H         clients that got their head
    done D          clients that saw TEXT
    lists L         distinct seq lists among the clients that are done
    ordered yes|no  every client's seqs strictly increase
    events E        how many events the first done client got
    seqs S1 S2 ...  that client's seqs
    closed C        clients the server closed

Exit status 0 when it ran to the end (the verdict is OUT's to give), 2
when a client could not connect or was refused.
"""
import base64
import json
import os
import selectors
import socket
import struct
import sys
import time


class Client:
    def __init__(self, mode):
        self.mode = mode
        self.buf = b""
        self.head = None
        self.chunked = False
        self.raw = b""  # body bytes before de-chunking
        self.seqs = []
        self.started = False
        self.done = False
        self.closed = False


def request(mode, port, token):
    if mode == "sse":
        return ("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                "Authorization: Bearer %s\r\nAccept: text/event-stream\r\n"
                "\r\n" % (port, token)).encode()
    key = base64.b64encode(os.urandom(16)).decode()
    return ("GET /api/v1/ws?access_token=%s HTTP/1.1\r\n"
            "Host: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n" % (token, port, key)).encode()


def dechunk(c):
    """Moves whole chunks of c.raw into c.buf."""
    while True:
        eol = c.raw.find(b"\r\n")
        if eol < 0:
            return
        size = int(c.raw[:eol].split(b";")[0] or b"0", 16)
        if len(c.raw) < eol + 2 + size + 2:
            return
        if size == 0:  # the last chunk: the server ended the stream
            c.closed = True
            c.raw = b""
            return
        c.buf += c.raw[eol + 2:eol + 2 + size]
        c.raw = c.raw[eol + 2 + size + 2:]


def take(c, seq, data, since, until):
    """One event for c: counted from since on, done at until."""
    if since and not c.started:
        if since not in data:
            return
        c.started = True
    c.seqs.append(seq)
    if until and until in data and (c.started or not since):
        c.done = True


def sse_events(c, since, until):
    while b"\n\n" in c.buf:
        ev, c.buf = c.buf.split(b"\n\n", 1)
        seq, data = None, b""
        for line in ev.split(b"\n"):
            if line.startswith(b"id: "):
                seq = int(line[4:])
            elif line.startswith(b"data: "):
                data = line[6:]
        if seq is None:
            continue
        take(c, seq, data.decode(), since, until)


def ws_frames(c, since, until):
    while len(c.buf) >= 2:
        op, n = c.buf[0] & 0xF, c.buf[1] & 0x7F
        off = 2
        if n == 126:
            if len(c.buf) < 4:
                return
            n = struct.unpack("!H", c.buf[2:4])[0]
            off = 4
        elif n == 127:
            if len(c.buf) < 10:
                return
            n = struct.unpack("!Q", c.buf[2:10])[0]
            off = 10
        if len(c.buf) < off + n:
            return
        data = c.buf[off:off + n]
        c.buf = c.buf[off + n:]
        if op == 8:
            c.closed = True
            return
        if op != 1:
            continue
        m = json.loads(data)
        if "seq" in m:
            take(c, m["seq"], data.decode(), since, until)


def main():
    port, token, n, mode = (int(sys.argv[1]), sys.argv[2],
                            int(sys.argv[3]), sys.argv[4])
    ready, out = sys.argv[5], sys.argv[6]
    since, until, timeout = None, None, 60.0
    rest = sys.argv[7:]
    while rest:
        if rest[0] == "--from":
            since = rest[1]
        elif rest[0] == "--until":
            until = rest[1]
        elif rest[0] == "--timeout":
            timeout = float(rest[1])
        rest = rest[2:]
    sel = selectors.DefaultSelector()
    clients = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        c = Client(mode)
        c.pending = request(mode, port, token)
        clients.append(c)
        sel.register(s, selectors.EVENT_WRITE, c)
    end = time.time() + timeout
    wrote_ready = False
    refused = 0
    while time.time() < end:
        for key, ev in sel.select(0.5):
            s, c = key.fileobj, key.data
            if ev & selectors.EVENT_WRITE:
                try:
                    sent = s.send(c.pending)
                except OSError:
                    refused += 1
                    sel.unregister(s)
                    continue
                c.pending = c.pending[sent:]
                if not c.pending:
                    sel.modify(s, selectors.EVENT_READ, c)
                continue
            try:
                got = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                got = b""
            if not got:
                c.closed = True
                sel.unregister(s)
                continue
            if c.head is None:
                c.buf += got
                if b"\r\n\r\n" not in c.buf:
                    continue
                head, rest_ = c.buf.split(b"\r\n\r\n", 1)
                c.head = head.split(b"\r\n")[0]
                want = b" 200 " if mode == "sse" else b" 101 "
                if want not in c.head + b" ":
                    refused += 1
                c.chunked = b"transfer-encoding: chunked" in head.lower()
                c.buf = b""
                got = rest_
            if c.chunked:
                c.raw += got
                dechunk(c)
            else:
                c.buf += got
            if mode == "sse":
                sse_events(c, since, until)
            else:
                ws_frames(c, since, until)
        heads = sum(1 for c in clients if c.head is not None)
        if not wrote_ready and heads == n:
            with open(ready + ".tmp", "w") as f:
                f.write("ready %d\n" % n)
            os.rename(ready + ".tmp", ready)
            wrote_ready = True
        if until and all(c.done or c.closed for c in clients):
            break
    heads = sum(1 for c in clients if c.head is not None)
    done = [c for c in clients if c.done]
    lists = {tuple(c.seqs) for c in done}
    ordered = all(all(a < b for a, b in zip(c.seqs, c.seqs[1:]))
                  for c in clients)
    first = done[0].seqs if done else []
    with open(out, "w") as f:
        f.write("heads %d\ndone %d\nlists %d\nordered %s\nevents %d\n"
                "seqs %s\nclosed %d\n" % (heads, len(done), len(lists),
                                "yes" if ordered else "no", len(first),
                                " ".join(map(str, first)),
                                sum(1 for c in clients if c.closed)))
    return 2 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
