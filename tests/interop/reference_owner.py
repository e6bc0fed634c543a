"""The Python reference discovery owner, for interop tests.

    reference_owner.py serve <nats_url> <secret> <project> <lease_seconds>
        Starts naas_abi_core's discovery (start_discovery) on the project, prints
        "ready" once it serves, and stops cleanly on SIGTERM or SIGINT.

    reference_owner.py dump <nats_url> <project>
        Prints the project's registry snapshot, decoded by the reference's
        protobuf classes, as JSON: {"revision": n, "records": [{"instance_id",
        "module_id", "owner", "status"}]}.
"""

import asyncio
import json
import signal
import sys

import nats
from naas_abi_core.services.discovery.discovery_factory import start_discovery
from naas_abi_proto.discovery.v1 import discovery_pb2 as pb


async def serve(url: str, secret: str, project: str, lease: float) -> None:
    nc = await nats.connect(url)
    primary = await start_discovery(nc, secret, project, lease_seconds=lease)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await primary.stop()
    await nc.drain()


async def dump(url: str, project: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    kv = await js.key_value(f"ABI_DISCOVERY_{project}")
    entry = await kv.get("registry")
    state = pb.RegistryState.FromString(entry.value or b"")
    records = [
        {
            "instance_id": r.instance.instance_id,
            "module_id": r.instance.descriptor.module_id,
            "owner": r.owner,
            "status": r.instance.status,
        }
        for r in state.records
    ]
    print(json.dumps({"revision": entry.revision, "records": records}), flush=True)
    await nc.close()


def main() -> None:
    mode = sys.argv[1]
    if mode == "serve":
        url, secret, project, lease = sys.argv[2:6]
        asyncio.run(serve(url, secret, project, float(lease)))
    elif mode == "dump":
        url, project = sys.argv[2:4]
        asyncio.run(dump(url, project))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
