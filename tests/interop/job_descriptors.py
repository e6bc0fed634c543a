"""Job descriptors and trigger timestamps as the Python reference builds them.

    job_descriptors.py <ns> [<ns> ...]
        Prints one JSON object: "descriptors", the hex of
        JobDescriptor.to_pb().SerializeToString() for a fixed set of jobs (the
        Rust test declares the same ones), and "fired_at", nats-py's parse of
        each stored timestamp in nanoseconds.
"""

import datetime
import json
import sys

from naas_abi_sdk.jobs import Cron, Every, JobDescriptor, OnEvent
from naas_abi_sdk.workflows import declare_workflow


def descriptors():
    return [
        JobDescriptor("ingest"),
        JobDescriptor(
            "nightly.report:v2",
            description="Nightly — report",
            triggers=(
                Cron("  0 0 2 * * *  ", time_zone="Europe/Paris", input={"b": 1, "a": "é"}),
                Cron("@daily"),
                Every("1h30m"),
                Every(datetime.timedelta(seconds=90), input={"k": [1, 2.5, None, True]}),
                OnEvent("orders.created", filter={"status": ["paid", "open"], "amount": {"gt": 10}}),
                OnEvent(event_type="https://ex.org/ontology#Invoice"),
            ),
            max_concurrency=16,
            timeout=datetime.timedelta(seconds=90.5),
            max_attempts=5,
            input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
            output_schema='{"type": "object"}',
        ),
        *workflows(),
    ]


class _Module:
    """What declare_workflow needs of a module: somewhere to declare the job."""

    def declare_job(self, descriptor, handler):
        pass


def workflows():
    async def plain(ctx, inp: dict) -> dict:
        return inp

    async def untyped(ctx, inp):
        return inp

    module = _Module()
    return [
        declare_workflow(module, "flow", plain, max_attempts=3, description="Three steps"),
        declare_workflow(
            module,
            "typed.flow",
            untyped,
            input_schema={"type": "object", "required": ["n"]},
            output_schema={"type": "integer"},
            max_concurrency=4,
            triggers=(Every("5m"),),
        ),
    ]


def fired_at(ns):
    return datetime.datetime.fromtimestamp(ns / 1_000_000_000.0, datetime.timezone.utc).isoformat()


print(
    json.dumps(
        {
            "descriptors": [d.to_pb().SerializeToString().hex() for d in descriptors()],
            "fired_at": [fired_at(int(ns)) for ns in sys.argv[1:]],
        }
    )
)
