"""The Python reference's job host and job caller, for interop tests.

    job_peer.py serve <nats_url> <token> <project> <module> <job> [<job> ...]
        Runs naas_abi_sdk's JobHost for the given jobs of <module>, keeping run
        records through the document service on the bus (namespace <module>);
        prints "ready" once every consumer exists, stops on SIGTERM/SIGINT.
        With OTEL_EXPORTER_OTLP_ENDPOINT set it exports its spans (the
        reference's telemetry) as service <module>, flushed at the stop.
        Every job runs one handler: it logs "payload <json>", then with
        {"block": true} waits until cancelled, with {"fail": "why"} raises,
        else returns {"echo": <payload>}. A <job> written
        "<name>:workflow:<max_attempts>" is a workflow instead, of two steps:
        "double" (n * 2), then "plus" (that + 1, or a RuntimeError when the
        input has "python_fails"); it returns {"out": <plus>}. A <job> written
        "<name>:caller:<max_attempts>" is a workflow that calls the workflow
        <input.workflow> of <input.module> on {"n": <input.n>} through
        FlowContext.call and returns {"child": <its output>}.

    job_peer.py trigger <nats_url> <token> <project> <module> <job> <payload_json> <key or ->
        Triggers through naas_abi_sdk's JobProxy (the reference caller) and
        prints {"run_id": ..., "duplicate": ...}. A <payload_json> of
        "@<path>" reads the payload from that file (payloads above the
        broker limit, which the reference sends as claim checks, do not fit
        an argument).

    job_peer.py run_workflow <nats_url> <token> <project> <module> <workflow> <input_json> <timeout_s>
        Runs the workflow through naas_abi_sdk's WorkflowProxy.start and
        WorkflowRun.result (the reference caller) and prints {"run_id": ...,
        "output": ..., "steps": [<key>, ...]}.

    job_peer.py wait <nats_url> <token> <project> <module> <job> <run_id> <timeout_s>
        Waits through naas_abi_sdk's JobRun.wait (the reference caller) and
        prints {"status": ..., "error": ...} of the record it returned.
"""

import asyncio
import json
import signal
import sys


async def handler(ctx):
    ctx.log("payload " + json.dumps(ctx.payload, sort_keys=True))
    if ctx.payload.get("block"):
        await ctx.cancelled.wait()
        return None
    if ctx.payload.get("fail"):
        raise RuntimeError(ctx.payload["fail"])
    return {"echo": ctx.payload}


async def flow(ctx, inp):
    doubled = await ctx.step("double", lambda: inp["n"] * 2)

    async def plus():
        if inp.get("python_fails"):
            raise RuntimeError("python fails plus")
        return doubled + 1

    return {"out": await ctx.step("plus", plus)}


async def caller(ctx, inp):
    child = await ctx.call(inp["module"], inp["workflow"], {"n": inp["n"]})
    return {"child": child}


def declared(job):
    from naas_abi_sdk.jobs import JobDescriptor
    from naas_abi_sdk.workflows import WorkflowSpec, workflow_handler

    name, _, rest = job.partition(":")
    if not rest:
        return name, (JobDescriptor(name), handler)
    kind, _, attempts = rest.partition(":")
    descriptor = JobDescriptor(
        name,
        kind="workflow",
        max_attempts=int(attempts),
        input_schema='{"type":"object"}',
    )
    body = caller if kind == "caller" else flow
    return name, (descriptor, workflow_handler(body, WorkflowSpec()))


def traced(service):
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, the reference's tracing
    (naas_abi_sdk.telemetry) exporting as `service`; returns what flushes it."""
    from naas_abi_sdk import telemetry

    if not telemetry.configure_from_env(service):
        return lambda: None
    from opentelemetry import trace

    return trace.get_tracer_provider().shutdown


async def serve(url, token, project, module, jobs):
    from naas_abi_sdk.document import DocumentClient
    from naas_abi_sdk.job_host import JobHost
    from naas_abi_sdk.services.document import DocumentService
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, token)
    documents = DocumentService(DocumentClient(transport, module))
    handlers = dict(declared(job) for job in jobs)
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
    nc = await transport.connect()
    await nc.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    flush = traced(module)
    print("ready", flush=True)
    await stop.wait()
    await host.close()
    await nc.drain()
    flush()


async def trigger(url, token, project, module, job, payload, key):
    from naas_abi_sdk.jobs import JobDescriptor, JobProxy
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, token)
    proxy = JobProxy(transport, project, module, JobDescriptor(job))
    if payload.startswith("@"):
        with open(payload[1:], encoding="utf-8") as file:
            payload = file.read()
    run = await proxy.trigger(
        json.loads(payload), idempotency_key=None if key == "-" else key
    )
    print(json.dumps({"run_id": run.run_id, "duplicate": run.duplicate}), flush=True)
    nc = await transport.connect()
    await nc.drain()


async def run_workflow(url, token, project, module, workflow, inp, timeout):
    from naas_abi_sdk.jobs import JobDescriptor
    from naas_abi_sdk.transport import Transport
    from naas_abi_sdk.workflows import WorkflowProxy

    transport = Transport(url, token)
    proxy = WorkflowProxy(
        transport, project, module, JobDescriptor(workflow, kind="workflow")
    )
    run = await proxy.start(json.loads(inp))
    output = await run.result(timeout=float(timeout))
    steps = [step["key"] for step in await run.steps()]
    print(
        json.dumps({"run_id": run.run_id, "output": output, "steps": steps}),
        flush=True,
    )
    nc = await transport.connect()
    await nc.drain()


async def wait(url, token, project, module, job, run_id, timeout):
    from naas_abi_sdk.jobs import JobRun
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, token)
    record = await JobRun(transport, project, module, job, run_id).wait(
        timeout=float(timeout)
    )
    print(
        json.dumps({"status": record.get("status"), "error": record.get("error")}),
        flush=True,
    )
    nc = await transport.connect()
    await nc.drain()


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "serve":
        url, token, project, module, *jobs = args
        asyncio.run(serve(url, token, project, module, jobs))
    elif command == "trigger":
        asyncio.run(trigger(*args))
    elif command == "run_workflow":
        asyncio.run(run_workflow(*args))
    elif command == "wait":
        asyncio.run(wait(*args))
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
