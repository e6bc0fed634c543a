"""The reference's schedule reconciliation, alone.

    job_schedules.py <nats_url> <token> <project> <module> <job>
        Runs naas_abi_sdk's JobHost.reconcile_schedules for <job> of <module>
        declared with the triggers the Rust test declares (Every("1s"),
        Cron("0 0 3 * * *", time_zone="Europe/Paris", input={"a": 1}),
        Every("90s", input={"b": [1, "é"]}), OnEvent("x.y")), prints "done".
"""

import asyncio
import sys


async def main(url, token, project, module, job):
    from naas_abi_sdk.job_host import JobHost
    from naas_abi_sdk.jobs import Cron, Every, JobDescriptor, OnEvent
    from naas_abi_sdk.transport import Transport

    descriptor = JobDescriptor(
        job,
        triggers=(
            Every("1s"),
            Cron("0 0 3 * * *", time_zone="Europe/Paris", input={"a": 1}),
            OnEvent("x.y"),
            Every("90s", input={"b": [1, "é"]}),
        ),
    )
    transport = Transport(url, token)
    host = JobHost(transport, None, module, project, {job: (descriptor, None)}, retention=None)
    nc = await transport.connect()
    await host.reconcile_schedules(nc.jetstream(), descriptor)
    print("done", flush=True)
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
