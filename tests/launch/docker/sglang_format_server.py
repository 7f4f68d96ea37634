"""A tiny server that boots like SGLang, for running inside a real container (read-only mount).

Prints an SGLang-format boot log (server args, weights, KV pools, the mamba-state cap and the
summary line), then serves /health, /health_generate, /v1/models and /get_server_info on
--host/--port and prints the ready line. Only the standard library: it runs on the host's Python
through the test image's bind mounts.

    python sglang_format_server.py --host 0.0.0.0 --port 30000 [--max-running-requests 48]
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import socket


def boot_log(args: argparse.Namespace) -> list[str]:
    ts = "[2026-09-11 10:00:00"
    slots = args.max_mamba_cache_size
    cap = slots // 5
    return [
        f"{ts}] server_args=ServerArgs(model_path='/models/tiny', host='{args.host}', port={args.port}, "
        f"max_running_requests={args.max_running_requests}, max_mamba_cache_size={slots})",
        f"{ts} TP0] Load weight end. elapsed=0.10 s, type=Glm4MoeLiteForCausalLM, avail mem=32.02 GB, "
        "mem usage=28.79 GB.",
        f"{ts} TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 134000, K size: 1.25 GB, V size: 1.25 GB",
        f"{ts} TP0] max_running_requests is capped to {cap} by the mamba state cache "
        f"(max_mamba_cache_size={slots}, 5 state slots per request). To raise it: increase "
        "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
        "--mamba-ssm-dtype bfloat16.",
        f"{ts} TP0] max_total_num_tokens=134000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={cap}, context_len=131072, available_gpu_mem=17.22 GB",
        f"{ts}] INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)",
    ]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        bodies = {
            "/health": {},
            "/health_generate": {},
            "/v1/models": {"object": "list", "data": [{"id": "tiny", "object": "model"}]},
            "/get_server_info": {"hostname": socket.gethostname(), "pid": os.getpid()},
        }
        if self.path not in bodies:
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps(bodies[self.path]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--max-running-requests", type=int, default=48)
    parser.add_argument("--max-mamba-cache-size", type=int, default=40)
    args = parser.parse_args()
    for line in boot_log(args):
        print(line, flush=True)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    print("[2026-09-11 10:00:01] The server is fired up and ready to roll!", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
