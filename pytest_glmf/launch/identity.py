"""The engine is a fact checked at attach and launch, not a label taken from the lanes file.

The lane's declared `engine:`, the server's `/v1/models` `owned_by`, its version endpoint (vLLM
`/version`, SGLang `/server_info`) and the boot log's engine must agree. When one that speaks
disagrees, the server is stopped (a launched one; an attached one is left alone) and the session
stops before measuring, with one line naming who says what. What each source said is kept in the
server's provenance (`engine_identity`), for the result file.
"""
from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from pytest_glmf.engine.client import Client, Timeouts
from pytest_glmf.engine.introspect import identify
from pytest_glmf.launch.base import BootError

if TYPE_CHECKING:
    from pytest_glmf.launch.base import Server


# plugin/options.py: the lane `--glmf-url` makes when no lane is named declares no engine; the
# server's own (agreeing) answer is then taken as the lane's engine.
URL_ONLY_SOURCES = ("--glmf-url", "glmf_url (ini)")


class EngineMismatch(BootError):
    """The server is not the engine the lane declares."""


def check_identity(server: "Server") -> None:
    lane = server.lane
    boot_engine = server.boot_facts.engine if server.boot_log_path is not None else None
    t = Timeouts(connect_s=5.0, first_token_s=10.0, between_tokens_s=10.0)
    declared = None if lane.source in URL_ONLY_SOURCES else lane.engine
    with Client(server.base_url, t) as client:
        ident = identify(client, declared, boot_engine)
    server.provenance["engine_identity"] = asdict(ident)
    problem = ident.disagreement()
    if problem is None:
        if declared is None and ident.agreed and ident.agreed != server.engine:
            server.engine = ident.agreed
            server.lane = replace(lane, engine=ident.agreed)
        return
    if server.launcher != "attach":
        server.stop()
    raise EngineMismatch(f"lane {lane.name!r} ({lane.source}): {problem} (at {server.base_url}); set the lane's "
                         f"engine: to what the server is, or point the lane at the right server")
