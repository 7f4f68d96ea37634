"""Kernel receive timestamps on a TCP socket, and a non-blocking send buffer, for code that reads its
sockets itself (asyncio's transports give no ancillary data).

With SO_TIMESTAMPNS set (Linux), every recvmsg carries the time the newest of the bytes it returns
reached the socket, on CLOCK_REALTIME; `recv` maps it onto perf_counter's clock (CLOCK_MONOTONIC)
with the offset of the two clocks read back to back, so a reader that is late (descheduled, busy
with other sockets) still gets the arrival time. Used by the load generator's streams
(load_http.KernelStampedStream) and the truth server (testing/truth_server.py).
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable

perf = time.perf_counter
SO_TIMESTAMPNS = 35                       # Linux (asm-generic and x86): receive time as a timespec
_TIMESPEC = struct.Struct("qq")
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what this socket receives; False where it cannot."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        return True
    except OSError:
        return False


def recv(sock: socket.socket, bufsize: int = 1 << 16) -> tuple[bytes, float]:
    """(data, receive time on perf_counter's clock). The kernel's time when the socket has one, else
    the time of this call. Raises what sock.recvmsg raises (BlockingIOError when nothing is there)."""
    data, t, _ = recv_times(sock, bufsize)
    return data, t


def recv_times(sock: socket.socket, bufsize: int = 1 << 16) -> tuple[bytes, float, float]:
    """(data, receive time, the time of this call), both on perf_counter's clock: the second says
    how late the read was (records.early_times bounds the read's other events with it)."""
    data, anc, _, _ = sock.recvmsg(bufsize, _ANC_SIZE)
    now = perf()
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
            sec, ns = _TIMESPEC.unpack_from(raw)
            kernel = sec + ns * 1e-9 - (time.clock_gettime(time.CLOCK_REALTIME) - perf())
            if 0.0 <= now - kernel < 1.0:     # a wall-clock step mid-run: keep the user time
                return data, kernel, now
    return data, now, now


class Sender:
    """Writes to a non-blocking socket at once and buffers only what it would not take, flushing
    when the loop says the socket is writable. `on_error` is called when the peer is gone."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, on_error: Callable[[], None]):
        self.sock, self.loop, self.on_error = sock, loop, on_error
        self.out = bytearray()
        self.on_drained: Callable[[], None] | None = None

    def write(self, data: bytes) -> None:
        if self.out:
            self.out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            return self.on_error()
        if sent < len(data):
            self.out += data[sent:]
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self.on_error()
        del self.out[:sent]
        if not self.out:
            self.loop.remove_writer(self.sock.fileno())
            if self.on_drained is not None:
                self.on_drained()

    def discard(self) -> None:
        self.out.clear()
