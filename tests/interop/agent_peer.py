"""The Python reference's agent host and agent caller, for interop tests.

    agent_peer.py serve <nats_url> <module_key> <project> <module> <tag>
        Registers <module> with discovery (naas_abi_sdk's DiscoverySession)
        and serves the agent "echo" with naas_abi_sdk's AgentHost, keeping
        records through the document service (namespace <module>). Prints
        "ready" once serving and READY, stops on SIGTERM.
        The agent answers "<tag>:<prompt>"; "block" waits until cancelled;
        "sleep:<ms>" answers "<tag>:slept" after that long. Streamed: token
        events a, b, c, then a message "<tag>:<prompt>".

    agent_peer.py call <nats_url> <module_key> <identity> <project> <module> <actions_json>
        Runs each action with naas_abi_sdk's AgentProxy (the reference caller)
        as <identity>, printing one JSON line per result:
        {"op": "invoke", "prompt": p[, "timeout": s]} -> {"result": ...} | {"error": code}
        {"op": "stream", "prompt": p} -> {"events": [[event, data], ...]} | {"error": code}
        {"op": "submit", "prompt": p, "id": i[, "deadline": s]} -> {"owner": ...}
        {"op": "status", "id": i} -> {"status": ..., "result": ..., "error_code": ...}
        {"op": "cancel", "id": i} -> {"status": ...}
        {"op": "wait", "id": i} -> {"result": ...} | {"error": code}
        With OTEL_EXPORTER_OTLP_ENDPOINT set, every action runs under one
        root span, exported (the reference's telemetry) as <identity>.
"""

import asyncio
import json
import signal
import sys


class Echo:
    def __init__(self, tag):
        self.tag = tag

    async def invoke(self, prompt, context):
        if prompt == "block":
            await asyncio.Event().wait()
        if prompt.startswith("sleep:"):
            await asyncio.sleep(int(prompt[6:]) / 1000)
            return f"{self.tag}:slept"
        return f"{self.tag}:{prompt}"

    async def stream_invoke(self, prompt, context):
        for data in ("a", "b", "c"):
            yield {"event": "token", "data": data}
        if prompt == "block":
            await asyncio.Event().wait()
        yield {"event": "message", "data": f"{self.tag}:{prompt}"}


async def serve(url, key, project, module, tag):
    from naas_abi_proto.discovery.v1 import discovery_pb2 as pb
    from naas_abi_sdk.agent_host import AgentHost
    from naas_abi_sdk.discovery import DiscoveryClient, DiscoverySession
    from naas_abi_sdk.document import DocumentClient
    from naas_abi_sdk.service_token import ModuleToken
    from naas_abi_sdk.services.document import DocumentService
    from naas_abi_sdk.transport import Transport

    transport = Transport(url, ModuleToken(module, key))
    client = DiscoveryClient(transport, project)
    descriptor = pb.ModuleDescriptor(
        module_id=module,
        package_version="0.0.0",
        contract_major=1,
        agents=[
            pb.AgentDescriptor(
                name="echo",
                description="says it back",
                contract_major=1,
                capabilities=["agent.invoke.v1"],
            )
        ],
    )
    session = DiscoverySession(client, descriptor)
    await session.start()
    documents = DocumentService(DocumentClient(transport, module))
    host = AgentHost(session, documents, {"echo": Echo(tag)})
    await host.start()
    session.initialized = True
    await session.renew()
    while session.status != "READY":
        await asyncio.sleep(0.1)
        await session.renew()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await host.drain(5)
    await host.close()
    await session.close()
    nc = await transport.connect()
    await nc.drain()


def error_code(exc):
    return getattr(exc, "code", type(exc).__name__)


async def call(url, key, identity, project, module, actions):
    from naas_abi_sdk.discovery import DiscoveryClient, ModuleProxy
    from naas_abi_sdk.service_token import ModuleToken
    from naas_abi_sdk.transport import Transport

    import contextlib

    from naas_abi_sdk import telemetry

    # With OTEL_EXPORTER_OTLP_ENDPOINT set: one root span around every
    # action, exported as <identity>, flushed at the end.
    root = contextlib.nullcontext()
    flush = lambda: None  # noqa: E731
    if telemetry.configure_from_env(identity):
        from opentelemetry import trace

        root = trace.get_tracer(telemetry.TRACER_NAME).start_as_current_span(f"{identity} calls")
        flush = trace.get_tracer_provider().shutdown
    transport = Transport(url, ModuleToken(identity, key))
    proxy = ModuleProxy(DiscoveryClient(transport, project), module)
    with root:
        await run_actions(proxy, actions)
    # Not drain: handles that were never read keep their updates inbox.
    nc = await transport.connect()
    await nc.close()
    flush()


async def run_actions(proxy, actions):
    agent = await proxy.get_agent("echo")
    for action in actions:
        op = action["op"]
        try:
            if op == "invoke":
                out = {"result": await agent.invoke(action["prompt"], timeout=action.get("timeout"))}
            elif op == "stream":
                events = [
                    [e["event"], e["data"]]
                    async for e in agent.stream_invoke(action["prompt"], timeout=30)
                ]
                out = {"events": events}
            elif op == "submit":
                handle = await agent.submit(
                    action["prompt"],
                    invocation_id=action["id"],
                    deadline_seconds=action.get("deadline"),
                )
                out = {"owner": handle.owner_instance_id}
            elif op == "status":
                status = await agent.invocation(action["id"]).status()
                out = {
                    "status": status.status,
                    "result": status.result,
                    "error_code": status.error_code,
                    "events": [[e["event"], e["data"]] for e in status.events],
                }
            elif op == "cancel":
                status = await agent.invocation(action["id"]).cancel()
                out = {"status": status.status}
            elif op == "wait":
                out = {"result": await agent.invocation(action["id"]).result(timeout=30)}
            else:
                out = {"error": f"unknown op {op}"}
        except Exception as exc:  # the test reads the code
            out = {"error": error_code(exc)}
        print(json.dumps(out), flush=True)


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "serve":
        asyncio.run(serve(*args))
    elif command == "call":
        *head, actions = args
        asyncio.run(call(*head, json.loads(actions)))
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
