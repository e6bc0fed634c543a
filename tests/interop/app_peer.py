"""The Python reference's app host and app caller, for interop tests.

    app_peer.py serve <folder>
        Runs a module with naas_abi_sdk's run_module (its AppHost) serving the
        app of <folder> (named "board", declared by its manifest when it has
        one): its files, and for any other path a plain ASGI
        app that answers the JSON {"method", "path", "query", "body_len",
        "caller", "user_id"} with its content-length (as an axum router
        does; a path "/fail" raises). Prints "EVENT ready
        instance=<instance id>" once it serves; stops on SIGTERM.

    app_peer.py call <module> <instance_id> <requests_json>
        Sends each request of <requests_json> (a list of {"method", "path",
        "query", "headers": [[name, value]], "body_len", "app", "user_id"})
        through the reference caller (naas_abi_sdk.app_host.call_app), a body
        that follows pulled with app_streams.pull_body, and prints one JSON list:
        {"status", "headers": {name: value}, "body_len", "body" (text when short)}
        or {"error": <code>, "message": <text>} per request.

Both read NATS_URL, ABI_PROJECT, E2E_ID (the module id) and ABI_MODULE_KEY.
"""

import asyncio
import json
import os
import sys
from pathlib import Path


def _env():
    return (
        os.environ["NATS_URL"],
        os.environ["ABI_PROJECT"],
        os.environ["E2E_ID"],
        os.environ["ABI_MODULE_KEY"],
    )


async def echo_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    if scope["path"].endswith("/fail"):
        raise RuntimeError("asked to fail")
    abi = scope.get("abi", {})
    body = json.dumps(
        {
            "method": scope["method"],
            "path": scope["path"][len(scope["root_path"]) :],
            "query": scope["query_string"].decode(),
            "body_len": size,
            "caller": abi.get("caller", ""),
            "user_id": abi.get("user_id", ""),
        },
        sort_keys=True,
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def serve(folder):
    from naas_abi_sdk.apps import AppDescriptor, read_app
    from naas_abi_sdk.discovery import DiscoveryConfiguration
    from naas_abi_sdk.module import BaseModule, run_module
    from naas_abi_sdk.service_token import ModuleToken

    url, project, module_id, key = _env()

    class M(BaseModule):
        # Declared from the folder's manifest when it has one, as the
        # reference reads one (named after the folder, "board"; its upload
        # limit, if any).
        apps = (
            (read_app(Path(folder)),)
            if (Path(folder) / "manifest.json").is_file()
            else (AppDescriptor("board", title="Board", root=Path(folder)),)
        )

        def on_initialized(self):
            self.expose_app("board", echo_app)

        async def run(self):
            session = self._discovery_session
            instance = session.instance_id if session is not None else "?"
            print(f"EVENT ready instance={instance}", flush=True)
            await asyncio.Event().wait()

    M.module_id = module_id
    asyncio.run(
        run_module(
            M,
            url=url,
            token=ModuleToken(module_id, key),
            discovery=DiscoveryConfiguration(project=project),
            drain_timeout_seconds=30,
        )
    )


async def call(module, instance_id, requests):
    from naas_abi_proto.app.v1 import app_pb2 as pb
    from naas_abi_sdk.app_host import call_app
    from naas_abi_sdk.app_streams import pull_body
    from naas_abi_sdk.service_token import ModuleToken
    from naas_abi_sdk.transport import RPCError, Transport

    url, project, identity, key = _env()
    transport = Transport(url, ModuleToken(identity, key))
    out = []
    try:
        for spec in requests:
            request = pb.HttpRequest(
                app=spec.get("app", "board"),
                method=spec.get("method", "GET"),
                path=spec["path"],
                query=spec.get("query", ""),
                body=b"x" * spec.get("body_len", 0),
                user_id=spec.get("user_id", ""),
                root_path="/apps/" + module + "/board",
            )
            for name, value in spec.get("headers", []):
                request.headers.add(name=name, value=value)
            try:
                response = await call_app(transport, project, instance_id, request)
            except RPCError as exc:
                out.append({"error": exc.code, "message": str(exc)})
                continue
            body = response.body
            if response.body_follows:
                nc = await transport.connect()
                parts = [c async for c in pull_body(nc, response.body_inbox)]
                body = b"".join(parts)
            out.append(
                {
                    "status": response.status,
                    "headers": {h.name: h.value for h in response.headers},
                    "body_len": len(body),
                    "body": body.decode() if len(body) < 4096 else "",
                }
            )
    finally:
        await transport.close()
    print(json.dumps(out), flush=True)


def main():
    command = sys.argv[1]
    if command == "serve":
        serve(sys.argv[2])
    elif command == "call":
        asyncio.run(call(sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
