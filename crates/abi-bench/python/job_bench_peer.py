"""The Python reference's JobHost for `abi-bench jobs`.

    job_bench_peer.py serve <nats_url> <token> <project> <module> <started_subject> <job>=<max_concurrency>[:<steps>] ...

Runs naas_abi_sdk's JobHost for the given jobs of <module> with its default
options (retention off, as the interop peer), keeping run records through the
document service on the bus (namespace <module>). Every job runs the bench's
trivial handler: its first action publishes the run id on <started_subject>
(core NATS, the same message our host's handler sends), then it returns None.
With <steps> above 0 the job is a workflow instead (naas_abi_sdk.workflows'
workflow_handler): after the announcement it runs <steps> journaled steps
(FlowContext.step) that each return their index.
Prints "ready" once every consumer exists and the subscriptions reached the
server; stops on SIGTERM/SIGINT.
"""

import asyncio
import signal
import sys


async def serve(url, token, project, module, started_subject, jobs):
    from naas_abi_sdk.document import DocumentClient
    from naas_abi_sdk.job_host import JobHost
    from naas_abi_sdk.jobs import JobDescriptor
    from naas_abi_sdk.services.document import DocumentService
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, token)
    documents = DocumentService(DocumentClient(transport, module))
    nc = await transport.connect()
    subject = started_subject

    async def handler(ctx):
        await nc.publish(subject, ctx.run_id.encode())
        return None

    from naas_abi_sdk.workflows import WorkflowSpec, workflow_handler

    async def index(i):
        # Async, as ours: a sync step function would run in a thread.
        return i

    def steps_of(count):
        async def flow(ctx, inp):
            await nc.publish(subject, ctx.run_id.encode())
            for i in range(count):
                await ctx.step(f"s{i}", index, i)
            return None

        return flow

    handlers = {}
    for spec in jobs:
        name, limits = spec.split("=")
        concurrency, _, steps = limits.partition(":")
        if int(steps or 0) > 0:
            descriptor = JobDescriptor(
                name,
                kind="workflow",
                max_concurrency=int(concurrency),
                input_schema='{"type":"object"}',
            )
            handlers[name] = (
                descriptor,
                workflow_handler(steps_of(int(steps)), WorkflowSpec()),
            )
        else:
            descriptor = JobDescriptor(name, max_concurrency=int(concurrency))
            handlers[name] = (descriptor, handler)
    host = JobHost(
        transport,
        documents,
        module,
        project,
        handlers,
        instance_id=f"{module}-py-1",
        retention=None,
    )
    await host.start()
    await nc.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await host.close()
    await nc.drain()


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command != "serve":
        sys.exit(f"unknown command {command!r}")
    url, token, project, module, started_subject, *jobs = args
    asyncio.run(serve(url, token, project, module, started_subject, jobs))


if __name__ == "__main__":
    main()
