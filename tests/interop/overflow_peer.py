"""The Python reference's RPC overflow host and client, for interop tests.

    overflow_peer.py <nats_url> <secret> <token> <size>

Starts naas_abi_core's OverflowHost (the one a reference engine runs), then,
while it is the only host on the bus, uploads <size> bytes of the test
pattern with naas_abi_sdk.overflow.upload and parks the same bytes as a
reply; prints {"upload": id, "parked": id, "owner": owner} on one line.
Then it answers commands on stdin, one JSON line each:

    download <id> <size>   read a parked reply (naas_abi_sdk.overflow.download)
    fetch <id>             read an upload as a service does (OverflowHost.fetch)
    stop_accepting         drain this host's `open` (new sessions go elsewhere)
    quit                   stop the host and exit

Every read prints {"len": n, "sha256": hex} or {"error": code, "message": ...}.
"""

import asyncio
import hashlib
import json
import sys


def pattern(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


def summary(data: bytes) -> dict:
    return {"len": len(data), "sha256": hashlib.sha256(data).hexdigest()}


async def main(url: str, secret: str, token: str, size: int) -> None:
    import nats
    from naas_abi_core.engine import nats_overflow
    from naas_abi_core.engine.nats_transfer import TransferError
    from naas_abi_sdk import overflow

    nc = await nats.connect(url)
    host = nats_overflow.OverflowHost(secret)
    await host.start(nc)
    headers = {"Nats-Auth-Token": token}

    async def call(subject, request, response_type):
        request.context.timeout_ms = 10_000
        reply = await nc.request(
            subject, request.SerializeToString(), headers=headers, timeout=10
        )
        response = response_type.FromString(reply.data)
        if response.HasField("error"):
            raise TransferError(response.error.code, response.error.message)
        return response

    data = pattern(size)
    upload = await overflow.upload(
        call, data, chunk_bytes=overflow.chunk_size(nc.max_payload)
    )
    parked = await host.park(headers, data)
    print(json.dumps({"upload": upload, "parked": parked, "owner": host.owner}), flush=True)

    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        words = line.split()
        if not words or words[0] == "quit":
            break
        try:
            if words[0] == "download":
                out = summary(await overflow.download(call, words[1], int(words[2])))
            elif words[0] == "fetch":
                out = summary(await host.fetch(words[1], headers))
            elif words[0] == "stop_accepting":
                await host.stop_accepting()
                out = {"stopped_accepting": True}
            else:
                out = {"error": "UNKNOWN", "message": words[0]}
        except TransferError as exc:
            out = {"error": exc.code, "message": str(exc)}
        except overflow.OverflowRefused as exc:
            out = {"error": exc.code, "message": str(exc)}
        print(json.dumps(out), flush=True)
    await host.stop()
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
