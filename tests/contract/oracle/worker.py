"""The oracle worker: the released SGLang's own code, answering the contract tests over a pipe.

Runs in the contract venv (tests/contract/setup), never in the project's: one JSON request per
line on stdin, one JSON answer per line on stdout (anything SGLang logs goes to stderr). The tests
(tests/contract/conftest.py) keep one worker per session, so SGLang is imported once (~7 s).

    {"op": "info"}                                        -> version, package dir
    {"op": "argv", "argv": [...]}                         -> the preflight probe's verdict (same code
                                                             as pytest_glmf/launch/preflight/probe.py)
    {"op": "model", "name": "ChatCompletionResponse", "data": {...}}
                                                          -> pydantic validation by protocol.py's model
    {"op": "generate_request", "data": {...}}             -> GenerateReqInput + SamplingParams checks
    {"op": "detect", "parser": "glm47", "tools": [...], "text": "...", "chunks": [...]}
                                                          -> FunctionCallParser, whole text and streamed
    {"op": "server_args", "argv": [...]}                  -> ServerArgs.resolved_dict() keys (the dump)

Files cited are inside the sglang 0.5.23 package.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
import traceback
import warnings
from typing import Any

warnings.filterwarnings("ignore")   # CPU torch: "Only CUDA ... support ..." at import


def _load_probe(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("glmf_preflight_probe", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Oracle:
    def __init__(self, probe_path: str):
        import sglang
        from sglang.srt.entrypoints.openai import protocol  # sglang/srt/entrypoints/openai/protocol.py

        self.sglang = sglang
        self.protocol = protocol
        self.probe = _load_probe(probe_path)

    def info(self, req: dict[str, Any]) -> dict[str, Any]:
        import os

        return {"version": self.probe._dist_version("sglang"),
                "package_dir": os.path.dirname(self.sglang.__file__)}

    def argv(self, req: dict[str, Any]) -> dict[str, Any]:
        return self.probe.probe("sglang", list(req["argv"]))

    def model(self, req: dict[str, Any]) -> dict[str, Any]:
        import pydantic

        cls = getattr(self.protocol, req["name"])
        try:
            obj = cls.model_validate(req["data"])
        except pydantic.ValidationError as exc:
            return {"ok": False, "errors": [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]}
        return {"ok": True, "errors": [], "dump": json.loads(obj.model_dump_json())}

    def generate_request(self, req: dict[str, Any]) -> dict[str, Any]:
        """The checks /generate applies before the scheduler sees a request: the FastAPI body model
        (sglang/srt/entrypoints/http_server.py `generate_request(obj: GenerateReqInput)`),
        `normalize_batch_and_arguments` (sglang/srt/managers/io_struct.py) and the sampling
        parameters' own `verify` (sglang/srt/sampling/sampling_params.py)."""
        from sglang.srt.managers.io_struct import GenerateReqInput
        from sglang.srt.sampling.sampling_params import SamplingParams

        try:
            obj = GenerateReqInput(**req["data"])
            obj.normalize_batch_and_arguments()
            params = obj.sampling_params if isinstance(obj.sampling_params, list) else [obj.sampling_params]
            for sp in params:
                sampling = SamplingParams(**(sp or {}))
                sampling.normalize(None)
                sampling.verify(req.get("vocab_size", 151552))
        except Exception as exc:  # noqa: BLE001 - the verdict is the answer
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, "error": None, "logprob_start_len": obj.logprob_start_len,
                "return_logprob": obj.return_logprob}

    def detect(self, req: dict[str, Any]) -> dict[str, Any]:
        """SGLang's FunctionCallParser (sglang/srt/function_call/function_call_parser.py) over the
        whole text (`parse_non_stream`, as serving_chat does for a non-streamed reply) and over the
        chunks (`parse_stream_chunk` then `parse_stream_end`, as for a streamed one)."""
        from sglang.srt.entrypoints.openai.protocol import Tool
        from sglang.srt.function_call.function_call_parser import FunctionCallParser

        tools = [Tool.model_validate(t) for t in req["tools"]]
        whole = FunctionCallParser(tools, req["parser"])
        text, calls = whole.parse_non_stream(req["text"])
        out: dict[str, Any] = {"normal_text": text,
                               "calls": [{"name": c.name, "arguments": c.parameters} for c in calls]}
        if req.get("chunks") is not None:
            streaming = FunctionCallParser(tools, req["parser"])
            normal, merged = "", {}
            pieces = [streaming.parse_stream_chunk(c) for c in req["chunks"]] + [streaming.parse_stream_end()]
            for t, items in pieces:
                normal += t or ""
                for item in items:
                    slot = merged.setdefault(item.tool_index, {"name": None, "arguments": ""})
                    slot["name"] = item.name or slot["name"]
                    slot["arguments"] += item.parameters or ""
            out["stream"] = {"normal_text": normal, "calls": [merged[k] for k in sorted(merged)]}
        return out

    def server_args(self, req: dict[str, Any]) -> dict[str, Any]:
        """The keys and order of the `server_args={...}` boot dump (sglang/srt/entrypoints/engine.py
        `_server_args_for_logging` -> `ServerArgs.resolved_dict()`), for argv as given."""
        from sglang.srt.server_args import ServerArgs

        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        ns = parser.parse_args(req["argv"])
        fields = ServerArgs.__dataclass_fields__
        return {"fields": list(fields), "namespace": {k: v for k, v in vars(ns).items()
                                                      if isinstance(v, (str, int, float, bool, type(None)))}}


def main() -> int:
    oracle = Oracle(sys.argv[1])
    out = sys.stdout
    sys.stdout = sys.stderr          # anything SGLang prints must not corrupt the answers
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                answer = {"ok": True, "result": getattr(oracle, req["op"])(req)}
        except Exception:  # noqa: BLE001 - report, keep serving
            answer = {"ok": False, "error": traceback.format_exc(limit=6)}
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
