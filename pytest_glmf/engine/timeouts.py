"""How long the client waits on a streamed answer, written once: the engine client's `Timeouts`,
the curve's and capacity's stream workers, the agents' sessions and a replayed trace default to
these, and a lane's `timeouts:` (lanes file) or a gate's `*_timeout_s` setting overrides them.
Plain numbers, so a stream worker reads them without loading the HTTP client."""
from __future__ import annotations

FIRST_TOKEN_S = 600.0     # includes queueing behind a full batch
BETWEEN_TOKENS_S = 60.0   # a gap this long between two chunks: the stream is dead
