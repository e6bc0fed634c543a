"""The Python reference's chat model host and chat model caller, for interop tests.

    model_peer.py serve
        Runs a module with naas_abi_sdk's run_module (its ModelHost) serving two
        chat models: "echo" (invoke(messages), no tools) and "tools"
        (invoke(messages, *, tools, tool_options)). Both answer an AIMessage
        whose content is the JSON {"echo": <last message's content>, "types":
        [<message types>], "tools": <tool count>}; a last message "slow" first
        sleeps E2E_SLOW_SECONDS (default 2). Prints "EVENT ready
        instance=<instance id>" once it serves, "EVENT chat <content>" when a
        chat starts; stops on SIGTERM.

    model_peer.py chat <module> <model> <text> [<stop> <options_json>]
        Calls the model through the reference caller (ModuleProxy.get_chat_model,
        then the LangChain model's ainvoke with stop and the options as keyword
        arguments) and prints {"type": ..., "content": ...} of the answer, or
        {"error": <code>, "message": <text>} when the call was refused.

Both read NATS_URL, ABI_PROJECT, E2E_ID (the module id) and ABI_MODULE_KEY.
"""

import asyncio
import json
import os
import sys


def _env():
    return (
        os.environ["NATS_URL"],
        os.environ["ABI_PROJECT"],
        os.environ["E2E_ID"],
        os.environ["ABI_MODULE_KEY"],
    )


class Echo:
    async def invoke(self, messages):
        return await answer(messages, [])


class WithTools:
    async def invoke(self, messages, *, tools=None, tool_options=None):
        return await answer(messages, tools or [])


async def answer(messages, tools):
    from langchain_core.messages import AIMessage

    last = messages[-1].content
    print(f"EVENT chat {last}", flush=True)
    if last == "slow":
        await asyncio.sleep(float(os.environ.get("E2E_SLOW_SECONDS", "2")))
    content = {"echo": last, "types": [m.type for m in messages], "tools": len(tools)}
    return AIMessage(content=json.dumps(content, sort_keys=True))


def serve():
    from naas_abi_sdk.discovery import DiscoveryConfiguration, ModelDescriptor
    from naas_abi_sdk.module import BaseModule, run_module
    from naas_abi_sdk.service_token import ModuleToken

    url, project, module_id, key = _env()

    class M(BaseModule):
        models = (
            ModelDescriptor("echo", "says it back"),
            ModelDescriptor("tools", "says it back, takes tools"),
        )

        def on_initialized(self):
            self.expose_model("echo", Echo())
            self.expose_model("tools", WithTools())

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


async def chat(module, model, text, stop, options):
    from langchain_core.messages import HumanMessage, SystemMessage
    from naas_abi_sdk.discovery import DiscoveryClient, ModuleProxy
    from naas_abi_sdk.service_token import ModuleToken
    from naas_abi_sdk.transport import RPCError, Transport

    url, project, identity, key = _env()
    transport = Transport(url, ModuleToken(identity, key))
    try:
        proxy = ModuleProxy(DiscoveryClient(transport, project), module)
        try:
            remote = await proxy.get_chat_model(model)
            reply = await remote.model.ainvoke(
                [SystemMessage("be brief"), HumanMessage(text)],
                stop=stop,
                **options,
            )
            print(json.dumps({"type": reply.type, "content": reply.content}), flush=True)
        except RPCError as exc:
            print(json.dumps({"error": exc.code, "message": str(exc)}), flush=True)
    finally:
        await transport.close()


def main():
    command = sys.argv[1]
    if command == "serve":
        serve()
    elif command == "chat":
        module, model, text = sys.argv[2:5]
        stop = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
        options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
        asyncio.run(chat(module, model, text, stop, options))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
