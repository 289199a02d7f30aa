#!/usr/bin/env python3
"""Loopback HTTP/1.1 forwarder that holds each request for a fixed delay.

Used by scripts/calibrate-gate.sh to inject a known regression in front of a
real engine: every request is read whole, held DELAY_MS, then sent upstream on
a fresh connection and the response streamed back byte for byte (chunked SSE
framing passes through unchanged). Independent of infergate's own code, so the
injected change is not measured by the thing that injects it.

    delay_forwarder.py LISTEN_PORT UPSTREAM_PORT DELAY_MS

Listens on 127.0.0.1 only and connects to 127.0.0.1 only. Prints
"listening PORT" once ready (LISTEN_PORT 0 picks a free port).
"""

import asyncio
import sys

HOST = "127.0.0.1"


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    lines = head.split(b"\r\n")
    out = [lines[0]]
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            length = int(value.strip())
        if key == b"connection":
            continue
        out.append(line)
    # Upstream closes after its response; the client keeps its own connection.
    out.append(b"Connection: close")
    body = await reader.readexactly(length) if length else b""
    return b"\r\n".join(out) + b"\r\n\r\n" + body


async def handle(client_r, client_w, upstream_port, delay_s):
    try:
        while True:
            try:
                request = await read_request(client_r)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            await asyncio.sleep(delay_s)
            up_r, up_w = await asyncio.open_connection(HOST, upstream_port)
            up_w.write(request)
            await up_w.drain()
            close_client = False
            first = True
            while True:
                chunk = await up_r.read(65536)
                if not chunk:
                    break
                if first:
                    # Keep the client's connection alive unless upstream framing
                    # is close-delimited (no length, not chunked).
                    head = chunk.split(b"\r\n\r\n", 1)[0].lower()
                    if b"content-length" not in head and b"chunked" not in head:
                        close_client = True
                    chunk = chunk.replace(b"Connection: close\r\n", b"", 1)
                    chunk = chunk.replace(b"connection: close\r\n", b"", 1)
                    first = False
                client_w.write(chunk)
                await client_w.drain()
            up_w.close()
            if close_client:
                return
    except ConnectionError:
        return
    finally:
        client_w.close()


async def main():
    listen_port, upstream_port, delay_ms = (int(a) for a in sys.argv[1:4])
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, upstream_port, delay_ms / 1000.0), HOST, listen_port
    )
    port = server.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main())
