"""The Python reference's app host and document client for `abi-bench apps`.

    app_bench_peer.py serve <nats_url> <module_key> <project> <module> <app>
        Runs <module> with naas_abi_sdk's run_module (its AppHost, default
        options) serving the app <app> with a plain ASGI app:
          GET /kib               1 KiB, with its content-length;
          GET /download?bytes=N  N bytes sent in 256 KiB messages with
                                 more_body (streamed as the host pulls them);
          POST /upload           reads receive() until more_body is false and
                                 answers the number of bytes it read.
        Stops on SIGTERM (it prints nothing: the bench probes it with GETs).

    app_bench_peer.py put <nats_url> <token> <namespace> <collection> <bytes> <puts>
        Through naas_abi_sdk's DocumentService (RPC overflow both ways above
        the broker's max payload), puts one document {"text": <bytes> letters,
        "n": i} unmeasured, then <puts> more, each timed; prints one JSON line
        {"ms": [...], "failed": n, "first_error": text or null}.
"""

import asyncio
import sys
import time

KIB = b"k" * 1024
FRAME = bytes(256 * 1024)


async def bench_app(scope, receive, send):
    if scope["type"] != "http":
        return  # no lifespan: the host then starts and stops it without one
    path = scope["path"][len(scope["root_path"]) :]
    if path == "/upload":
        size = 0
        async for chunk in body_chunks(receive):
            size += len(chunk)
        await respond(send, 200, str(size).encode(), b"text/plain")
    elif path == "/download":
        query = scope["query_string"].decode()
        left = int(query.removeprefix("bytes="))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/octet-stream"),
                    (b"content-length", str(left).encode()),
                ],
            }
        )
        while left > 0:
            frame = FRAME[: min(left, len(FRAME))]
            left -= len(frame)
            await send(
                {"type": "http.response.body", "body": frame, "more_body": left > 0}
            )
    elif path == "/kib":
        await respond(send, 200, KIB, b"application/octet-stream")
    else:
        await respond(send, 404, b"Not found", b"text/plain")


async def body_chunks(receive):
    """The request body's chunks, as the host pulls them."""
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
        yield message.get("body", b"")


async def respond(send, status, body, content_type):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def serve(url, key, project, module_id, app):
    from naas_abi_sdk.apps import AppDescriptor
    from naas_abi_sdk.discovery import DiscoveryConfiguration
    from naas_abi_sdk.module import BaseModule, run_module
    from naas_abi_sdk.service_token import ModuleToken

    class Bench(BaseModule):
        apps = (AppDescriptor(app, title="Bench"),)

        def on_initialized(self):
            self.expose_app(app, bench_app)

        async def run(self):
            await asyncio.Event().wait()

    Bench.module_id = module_id
    token = ModuleToken(module_id, key)
    on_bus = DiscoveryConfiguration(project=project)
    running = run_module(Bench, url=url, token=token, discovery=on_bus)
    asyncio.run(running)


async def put(url, token, namespace, collection, size, puts):
    import json

    from naas_abi_sdk.document import DocumentClient
    from naas_abi_sdk.services.document import DocumentService
    from naas_abi_sdk.services.models import CollectionSpec
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, token)
    docs = DocumentService(DocumentClient(transport, namespace))
    await docs.ensure_collection(CollectionSpec(collection))
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    times, failed, first_error = [], 0, None
    for n in range(puts + 1):
        start = time.perf_counter()
        try:
            stored = await docs.put(collection, f"p{n}", {"text": text, "n": n})
            if stored.version != 1:
                raise RuntimeError(f"version {stored.version}")
        except Exception as exc:  # noqa: BLE001 - counted, the first reported
            failed += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"
            continue
        if n > 0:
            times.append((time.perf_counter() - start) * 1e3)
    await transport.close()
    print(
        json.dumps({"ms": times, "failed": failed, "first_error": first_error}),
        flush=True,
    )


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "serve":
        serve(*args)
    elif command == "put":
        url, token, namespace, collection, size, puts = args
        asyncio.run(put(url, token, namespace, collection, int(size), int(puts)))
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
