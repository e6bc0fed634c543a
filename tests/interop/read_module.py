"""Reads module descriptors as the Python reference's discovery client does.

    read_module.py <hex> [<hex> ...]
        Each argument is the hex of a serialized abi.discovery.v1
        ModuleDescriptor. Each is decoded into the instance a ModuleProxy
        call returns (naas_abi_sdk.discovery._instance: its jobs through
        JobDescriptor.from_pb, its apps through AppDescriptor). Prints one
        JSON list of {"module_id", "jobs"} and exits 0, or prints the
        reference's error and exits 1.
"""

import json
import sys

from naas_abi_proto.discovery.v1 import discovery_pb2 as pb
from naas_abi_sdk.discovery import _instance

out = []
for arg in sys.argv[1:]:
    descriptor = pb.ModuleDescriptor.FromString(bytes.fromhex(arg))
    instance = pb.Instance(instance_id="i1", status="READY", descriptor=descriptor)
    try:
        read = _instance(instance)
    except Exception as exc:  # noqa: BLE001 - reported to the Rust test
        print(f"{descriptor.module_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    out.append({"module_id": read.module_id, "jobs": [j.name for j in read.jobs]})
print(json.dumps(out))
