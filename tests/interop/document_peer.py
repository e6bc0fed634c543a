"""The Python reference's document service, server and client, for interop tests.

    document_peer.py serve <nats_url> <secret> <sqlite_path>
        Serves abi.svc.document.v1 with naas_abi_core's NATS primary adapter over
        its SQLite adapter; prints "ready" once it serves, stops on SIGTERM/SIGINT.

    document_peer.py big <nats_url> <token> <namespace> <bytes>
        Puts one document holding a string of <bytes> characters (above the
        broker's max payload: RPC overflow both ways) through naas_abi_sdk's
        DocumentService, reads it back, and prints what it saw as JSON.

    document_peer.py client <nats_url> <token> <namespace>
        Runs one scenario through naas_abi_sdk's DocumentService against whatever
        document service answers on the bus, checking every answer; prints one
        JSON object of what it saw and exits 0, or prints the failed check and
        exits 1.
"""

import asyncio
import json
import signal
import sys
from datetime import datetime, timezone


async def serve(url: str, secret: str, path: str) -> None:
    import nats
    from naas_abi_core.services.document.adapters.primary.document__primary_adapter__NATS import (
        DocumentPrimaryAdapterNATS,
    )
    from naas_abi_core.services.document.adapters.secondary.DocumentSecondaryAdapterSQLite import (
        DocumentSecondaryAdapterSQLite,
    )
    from naas_abi_core.services.document.DocumentService import DocumentService

    from naas_abi_core.engine import nats_overflow

    nc = await nats.connect(url)
    # The overflow host a reference engine runs beside its primaries.
    overflow = nats_overflow.OverflowHost(secret)
    await overflow.start(nc)
    nats_overflow.install(overflow)
    service = DocumentService._for_engine(DocumentSecondaryAdapterSQLite(path))
    primary = DocumentPrimaryAdapterNATS(service, secret)
    await primary.start(nc)
    await nc.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await primary.stop()
    await overflow.stop()
    await nc.drain()


def check(condition: bool, what: str) -> None:
    if not condition:
        print(json.dumps({"failed": what}), flush=True)
        sys.exit(1)


async def client(url: str, token: str, namespace: str) -> None:
    from naas_abi_sdk.document import DocumentClient
    from naas_abi_sdk.services.document import DocumentService
    from naas_abi_sdk.services.errors import DocumentNotFound
    from naas_abi_sdk.services.models import CollectionSpec, FieldSpec
    from naas_abi_sdk.transport import RPCError, Transport

    transport = Transport(url, token)
    docs = DocumentService(DocumentClient(transport, namespace))
    seen = {}
    await docs.ensure_collection(
        CollectionSpec(
            "runs",
            fields=(FieldSpec("status", "string", indexed=True), FieldSpec("n", "int")),
        )
    )
    when = datetime(2026, 10, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    first = await docs.put(
        "runs", "r1", {"status": "RUNNING", "n": 1, "at": when, "raw": b"\x00\x01"}, if_version=0
    )
    check(first.version == 1, "a create starts at version 1")
    try:
        await docs.put("runs", "r1", {"status": "X"}, if_version=0)
        check(False, "a second create-only put conflicts")
    except Exception as exc:  # noqa: BLE001 - the SDK maps codes to its own classes
        seen["create_again"] = type(exc).__name__
    second = await docs.put("runs", "r1", {"status": "SUCCEEDED", "n": 2, "at": when}, if_version=1)
    check(second.version == 2, "a compare-and-swap bumps the version")
    try:
        await docs.put("runs", "r1", {"status": "Y"}, if_version=1)
        check(False, "a stale compare-and-swap conflicts")
    except Exception as exc:  # noqa: BLE001
        seen["stale_cas"] = type(exc).__name__
    got = await docs.get("runs", "r1")
    check(got.data == {"status": "SUCCEEDED", "n": 2, "at": when}, f"get returns the data: {got.data!r}")
    check(got.created_at == first.created_at, "created_at is kept")
    for i in range(2, 12):
        await docs.put("runs", f"r{i:02d}", {"status": "RUNNING" if i % 2 else "FAILED", "n": i})
    page = await docs.find("runs", where=[("status", "eq", "RUNNING")], order_by=("n", "desc"), limit=3)
    seen["first_page"] = [d.id for d in page.items]
    ids = [d.id async for d in docs.iterate("runs", where=[("n", "gte", 3)], order_by=("n", "asc"), batch=4)]
    seen["iterated"] = ids
    seen["count"] = await docs.count("runs", [("status", "in", ["RUNNING", "SUCCEEDED"])])
    await docs.delete("runs", "r02", if_version=1)
    try:
        await docs.get("runs", "r02")
        check(False, "a deleted document is gone")
    except DocumentNotFound:
        seen["deleted"] = True
    try:
        await docs.find("runs", where=[("n", "like", 1)])
        check(False, "an unknown operator is refused")
    except RPCError as exc:
        seen["bad_operator"] = [exc.code, str(exc)]
    except Exception as exc:  # noqa: BLE001 - domain error classes wrap RPCError
        seen["bad_operator"] = [getattr(exc, "code", type(exc).__name__), str(exc)]
    seen["collections"] = await docs.collections()
    await transport.close()
    print(json.dumps(seen, sort_keys=True), flush=True)


async def big(url: str, token: str, namespace: str, size: str) -> None:
    from naas_abi_sdk.document import DocumentClient
    from naas_abi_sdk.services.document import DocumentService
    from naas_abi_sdk.services.models import CollectionSpec
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, token)
    docs = DocumentService(DocumentClient(transport, namespace))
    await docs.ensure_collection(CollectionSpec("blobs"))
    text = "".join(chr(ord("a") + i % 26) for i in range(int(size)))
    put = await docs.put("blobs", "py", {"text": text, "n": 1})
    got = await docs.get("blobs", "py")
    theirs = await docs.get("blobs", "rust")
    await transport.close()
    print(
        json.dumps(
            {
                "put_version": put.version,
                "read_back_equal": got.data == {"text": text, "n": 1},
                "rust_text_len": len(theirs.data["text"]),
                "rust_text_equal": theirs.data["text"] == text,
            }
        ),
        flush=True,
    )


def main() -> None:
    mode = sys.argv[1]
    if mode == "serve":
        asyncio.run(serve(*sys.argv[2:5]))
    elif mode == "big":
        asyncio.run(big(*sys.argv[2:6]))
    elif mode == "client":
        asyncio.run(client(*sys.argv[2:5]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
