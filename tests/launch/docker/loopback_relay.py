"""Run a loopback-only server inside a container and relay the container's port to it.

The simulator refuses to bind anything but 127.0.0.1, and a published container port reaches the
container's own interface, never its loopback. This relay listens on 0.0.0.0:LISTEN inside the
container, forwards every connection to 127.0.0.1:TARGET, runs the server as its child (output
inherited, so it is the container's log) and exits with the child's code; SIGTERM (from docker
stop, via tini) is passed on to the child. Standard library only.

    python loopback_relay.py LISTEN TARGET -- python -m pytest_glmf.sim --port TARGET ...
"""
from __future__ import annotations

import asyncio
import signal
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: int) -> None:
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        writer.close()              # not listening yet: the launcher's probe sees a reset and retries
        return
    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def main(argv: list[str]) -> int:
    listen, target, sep, *command = argv
    assert sep == "--" and command, __doc__
    child = await asyncio.create_subprocess_exec(*command)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, child.terminate)
    server = await asyncio.start_server(lambda r, w: _relay(r, w, int(target)), "0.0.0.0", int(listen))
    code = await child.wait()
    server.close()
    return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
