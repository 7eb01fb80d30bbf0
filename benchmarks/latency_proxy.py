"""A TCP proxy that delays every chunk by a fixed time in each direction: a slow network path.

Bytes keep their order and the throughput is not limited; only the latency grows (a request and
its answer each wait `--delay-ms`). Used by benchmarks/fleet.py for its slow cluster, whose broker
advertises the proxy's port, so every client connection (krm's included) goes through it.

Usage: .venv/bin/python benchmarks/latency_proxy.py --listen PORT --to HOST:PORT --delay-ms 200
"""

from __future__ import annotations

import argparse
import asyncio
import time


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Read chunks as they come; write each one `delay_s` after it arrived (a queue keeps the order)."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(1 << 16)
            await queue.put((time.monotonic() + delay_s, data))
            if not data:
                break
        await sender
    except (ConnectionError, asyncio.CancelledError):
        sender.cancel()
    finally:
        writer.close()


async def _serve(listen: int, host: str, port: int, delay_s: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pump(client_r, up_w, delay_s), _pump(up_r, client_w, delay_s),
                             return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", type=int, required=True, help="local port to accept on (127.0.0.1)")
    ap.add_argument("--to", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--delay-ms", type=float, default=200.0, help="added to each direction (default 200)")
    args = ap.parse_args()
    host, _, port = args.to.rpartition(":")
    try:
        asyncio.run(_serve(args.listen, host or "127.0.0.1", int(port), args.delay_ms / 1000))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
