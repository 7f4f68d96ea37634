"""The one way a route waits for a request's tokens: streamed (batch by batch) or to the end.

Every generation endpoint submits its `SimRequest`s to the scheduler and then either iterates
`TokenStream` (a streamed answer: one batch of new token ids per decode step, several tokens per
batch under speculative decoding) or awaits `run_to_end` (a JSON answer, one request or a batch).
Both watch the connection: a client that goes away aborts its requests, and a request that ends
for any reason other than finishing is never left running.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from pytest_glmf.sim.http import Receive, StreamCut, watch_disconnect

if TYPE_CHECKING:
    from pytest_glmf.sim.scheduler import Scheduler, SimRequest


class TokenStream:
    """`async with TokenStream(scheduler, r, receive) as tokens: async for ids in tokens: ...`"""

    def __init__(self, scheduler: "Scheduler", r: "SimRequest", receive: Receive):
        self.scheduler, self.r, self.receive = scheduler, r, receive

    async def __aenter__(self) -> "TokenStream":
        self.scheduler.submit(self.r)
        self._watcher = watch_disconnect(self.receive, lambda: self.scheduler.abort(self.r))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._watcher.cancel()
        if not self.r.done:
            self.scheduler.abort(self.r)

    async def __aiter__(self) -> AsyncIterator[list[int]]:
        """New token ids per decode step; the last batch (possibly empty) comes when the request is done."""
        r = self.r
        while True:
            await r.event.wait()
            ids = r.take()
            if r.finish_reason == "abort":
                raise StreamCut("client disconnected")
            if ids or r.done:
                yield ids
            if r.done:
                return


async def run_to_end(scheduler: "Scheduler", rs: Sequence["SimRequest"], receive: Receive) -> None:
    """Submit every request and wait until all are done (one disconnect watcher for all of them)."""
    for r in rs:
        scheduler.submit(r)
    def abort_all() -> None:
        for r in rs:
            scheduler.abort(r)

    watcher = watch_disconnect(receive, abort_all)
    try:
        for r in rs:
            while not r.done:
                await r.event.wait()
                r.event.clear()
    finally:
        watcher.cancel()
        for r in rs:
            if not r.done:
                scheduler.abort(r)
    if any(r.finish_reason == "abort" for r in rs):
        raise StreamCut("client disconnected")
