"""The load generator's lean HTTP/1.1 streaming path.

Why not httpx here (bench/README.md has the numbers): an httpx AsyncClient stream timestamps a
chunk only after its task is resumed and h11, the line decoder and anyio have run for it, one
stream after another; on a busy box that put 1-118 ms (32 streams) and 240-340 ms (128 streams)
between a chunk's arrival and its timestamp, against 0.03 ms here, at ~2x our CPU per event. Its
pool also opens connections inside the timed window. The hot path
here is one `perf_counter()` call and one list append per socket read, in the protocol callback;
de-chunking, line splitting and JSON parsing (`client.parse_sse_line`, the one SSE parser) happen
after the run from the stored (time, bytes) pairs, so they cannot delay other streams' timestamps.
Connections are opened before a run starts, so connect time is never inside a TTFT.

Receive times come from the kernel where it gives them (plain HTTP on Linux): each socket has
SO_TIMESTAMPNS set and is read with recvmsg, so a read carries the time its newest bytes reached
the socket, not the time this process got round to reading it. A client descheduled for 3 ms, or
busy with another stream's burst, then stamps nothing late; the only events stamped late are those
that shared a read with a later event of the same stream (the read carries the later one's time).
Each read also keeps when it was made (`read_user_s`), and `decode_reads(reads_info=True)` says
for each line which read completed it: records.error_bounds turns that into how far each of the
run's numbers can be off, and selfcheck.client_check judges that bound. Over TLS or where the kernel
gives no time, reads are stamped with perf_counter() on arrival in user space.
"""
from __future__ import annotations

import asyncio
import http.client
import json
import math
import socket
import ssl as ssl_mod
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from pytest_glmf.engine.httperror import body_excerpt
from pytest_glmf.load import sockstamp

perf = time.perf_counter


def split_url(base_url: str) -> tuple[str, int, bool, str]:
    u = urlsplit(base_url)
    https = u.scheme == "https"
    return u.hostname or "127.0.0.1", u.port or (443 if https else 80), https, u.path.rstrip("/")


def build_request(host: str, port: int, path: str, body: dict[str, Any], api_key: str | None = None,
                  request_id: str | None = None) -> bytes:
    payload = json.dumps(body, separators=(",", ":")).encode()
    auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
    # X-Request-ID: a conversation's turn, named in the server's logs (and the truth server's record)
    rid = f"X-Request-ID: {request_id}\r\n" if request_id else ""
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\n{auth}{rid}Content-Length: {len(payload)}\r\n\r\n")
    return head.encode() + payload


class StreamProtocol(asyncio.Protocol):
    """Collects (receive time, bytes) for one streamed response; resolves `done` at [DONE], at the
    end of a non-streamed (error) body, or when the connection closes."""

    stamps = "user"      # where receive times come from: "user" (perf_counter on arrival) or "kernel"

    def __init__(self, done: asyncio.Future[None]):
        self.reads: list[tuple[float, bytes]] = []
        self.read_user_s: list[float] = []   # when each read was made (kernel stamps: later than its time)
        self.done = done
        self.transport: Any = None
        self.t_send_s: float | None = None
        self._prev = b""
        self._plain: int | None = None   # expected total length of a Content-Length response

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, request: bytes) -> None:
        self.t_send_s = perf()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        t = perf()
        self._on_data(t, data, t)

    def _on_data(self, t: float, data: bytes, t_user: float) -> None:
        self.reads.append((t, data))
        self.read_user_s.append(t_user)
        # End detection stays cheap: substring searches over this read plus the seam with the last.
        if b"[DONE]" in data or b"[DONE]" in self._prev + data[:8]:
            self._finish()
        elif data.endswith(b"0\r\n\r\n") and (self._prev + data).endswith(b"\r\n0\r\n\r\n"):
            self._finish()   # chunked body ended without a [DONE] event
        elif len(self.reads) <= 2 or self._plain is not None:
            self._check_plain_body()
        self._prev = data[-8:]

    def _check_plain_body(self) -> None:
        raw = b"".join(d for _, d in self.reads)
        end = raw.find(b"\r\n\r\n")
        if end < 0:
            return
        head = raw[:end].lower()
        if b"transfer-encoding: chunked" in head:
            if raw.endswith(b"\r\n0\r\n\r\n"):
                self._finish()
            return
        for line in head.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                self._plain = end + 4 + int(line.split(b":", 1)[1])
        if self._plain is not None and len(raw) >= self._plain:
            self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()


class KernelStampedStream(StreamProtocol):
    """A plain-HTTP stream on its own non-blocking socket, read with recvmsg: every read is stamped
    with the kernel's receive time of its newest bytes (sockstamp.recv)."""

    stamps = "kernel"

    def __init__(self, done: asyncio.Future[None], sock: socket.socket, loop: asyncio.AbstractEventLoop):
        super().__init__(done)
        self.sock, self.loop = sock, loop
        self.sender = sockstamp.Sender(sock, loop, self._lost)   # a large prompt may not go in one send
        self.transport = self           # close() below, for callers written against a transport
        loop.add_reader(sock.fileno(), self._readable)

    def send(self, request: bytes) -> None:
        self.t_send_s = perf()
        if self.sock.fileno() >= 0:
            self.sender.write(request)

    def _readable(self) -> None:
        try:
            data, t, t_user = sockstamp.recv_times(self.sock)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._lost()
        if not data:
            return self._lost()
        self._on_data(t, data, t_user)

    def _lost(self) -> None:
        self.close()
        self._finish()

    def close(self) -> None:
        fd = self.sock.fileno()
        if fd >= 0:
            self.loop.remove_reader(fd)
            self.loop.remove_writer(fd)
            self.sock.close()


def kernel_stamps_available() -> bool:
    return sys.platform.startswith("linux")


async def open_stream(host: str, port: int, https: bool, kernel_stamps: bool = True) -> StreamProtocol:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    if kernel_stamps and not https and kernel_stamps_available():
        family, kind, proto_num, _, addr = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto_num)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, addr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        stream = KernelStampedStream(done, sock, loop)
        if not sockstamp.enable(sock):  # a kernel without it: same path, user-space times
            stream.stamps = "user"
        return stream
    ctx = ssl_mod.create_default_context() if https else None
    _, proto = await loop.create_connection(lambda: StreamProtocol(done), host, port, ssl=ctx,
                                            server_hostname=host if https else None)
    return proto


def decode_reads(reads: list[tuple[float, bytes]], reads_info: bool = False, read_user_s: list[float] | None = None
                 ) -> tuple[int | None, list[tuple[Any, ...]], str | None]:
    """(status, timed lines of the body, error) from the raw reads of one response. Each line gets
    the receive time of the read that completed it: (time, line). With `reads_info`, each line is
    (time, line, previous read's time, newest, when the read was made) where `newest` says the
    line is the last complete one of its read with nothing of a later event after it: with kernel
    receive times (the newest bytes' arrival) only such a line's time is exact; any other line of
    the read arrived after the previous read (-inf for the first read) and, the loop being late
    by at most its measured lag, not long before the read was made (`read_user_s`, default: the
    read's time). records.early_times uses them."""
    status: int | None = None
    t_prev = -math.inf
    info: list[tuple[float, str, float, bool, float]] = []
    u = math.nan
    lines: list[tuple[float, str]] = []
    raw = b""
    body = b""
    chunked: bool | None = None
    need = 0            # bytes still owed to the current chunk
    error: str | None = None
    for k, (t, data) in enumerate(reads):
        u = read_user_s[k] if read_user_s is not None else t
        raw += data
        if chunked is None:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = raw[:end].decode("latin-1").split("\r\n")
            try:
                status = int(head[0].split()[1])
            except (IndexError, ValueError):
                return None, [], f"bad status line {head[0][:80]!r}"
            chunked = any(h.lower().replace(" ", "") == "transfer-encoding:chunked" for h in head[1:])
            raw = raw[end + 4:]
        if chunked:
            while raw:
                if need == 0:
                    eol = raw.find(b"\r\n")
                    if eol < 0:
                        break
                    size_txt = raw[:eol].split(b";")[0].strip()
                    if not size_txt:       # CRLF after a chunk's data
                        raw = raw[eol + 2:]
                        continue
                    need = int(size_txt, 16)
                    raw = raw[eol + 2:]
                    if need == 0:
                        raw = b""
                        break
                take = raw[:need]
                body += take
                need -= len(take)
                raw = raw[len(take):]
        else:
            body += raw
            raw = b""
        first = len(lines)
        while True:
            nl = body.find(b"\n")
            if nl < 0:
                break
            lines.append((t, body[:nl].rstrip(b"\r").decode("utf-8", "replace")))
            body = body[nl + 1:]
        if reads_info:
            # the read's newest bytes: the last non-empty line, unless part of a later line follows it
            last = max((i for i in range(first, len(lines)) if lines[i][1].strip()), default=None)
            whole = not body.strip() and not (chunked and (need or raw.strip()))
            info += [(t, line, t_prev, i == last and whole, u) for i, (_, line) in enumerate(lines[first:], first)]
        t_prev = t
    out: list[tuple[Any, ...]] = list(info) if reads_info else list(lines)
    if status is not None and status != 200:
        text = "".join(line for _, line in lines) + body.decode("utf-8", "replace")
        error = f"HTTP {status}: {body_excerpt(text)}"
    elif body.strip():
        tail = body.decode("utf-8", "replace")
        out.append((reads[-1][0], tail, t_prev, True, u) if reads_info else (reads[-1][0], tail))
    return status, out, error


async def http_call(host: str, port: int, https: bool, path: str, method: str = "GET", timeout_s: float = 10.0,
                    api_key: str | None = None) -> tuple[int, bytes]:
    """A one-shot request on its own connection (cache flush, /metrics snapshots and sampling)."""
    ctx = ssl_mod.create_default_context() if https else None
    # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancel (Ctrl-C) that lands as
    # the awaited call completes, and the command then runs to its end (CI saw it in glmf capacity)
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port, ssl=ctx)
    auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
    try:
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}Content-Length: 0\r\n"
                     f"Connection: close\r\n\r\n".encode())
        async with asyncio.timeout(timeout_s):
            data = await reader.read(-1)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    if b"transfer-encoding: chunked" in head.lower():
        body = b"".join(_dechunk(body))
    return status, body


def http_get_blocking(host: str, port: int, https: bool, path: str, timeout_s: float = 10.0,
                      api_key: str | None = None) -> tuple[int, bytes]:
    """A one-shot GET from a thread, never from an event loop (the /metrics sampler): (status, body)."""
    conn: http.client.HTTPConnection = (http.client.HTTPSConnection(host, port, timeout=timeout_s,
                                                                    context=ssl_mod.create_default_context())
                                        if https else http.client.HTTPConnection(host, port, timeout=timeout_s))
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _dechunk(raw: bytes) -> Iterator[bytes]:
    while raw:
        eol = raw.find(b"\r\n")
        if eol < 0:
            return
        size = int(raw[:eol].split(b";")[0] or b"0", 16)
        if size == 0:
            return
        yield raw[eol + 2: eol + 2 + size]
        raw = raw[eol + 4 + size:]
