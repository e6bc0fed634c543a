"""The Python reference's agent and chat model hosts for `abi-bench agents`.

    agent_bench_peer.py serve <nats_url> <module_key> <project> <module> <agent> <model>

Runs <module> with naas_abi_sdk's run_module (its AgentHost and ModelHost,
their default options, records through the document service on the bus)
serving one echo agent <agent> (its result is the prompt) and one echo chat
model <model> (an AI message whose content is the last message's). Prints
"ready" once the module runs (served and READY); stops on SIGTERM.
"""

import asyncio
import sys


class EchoAgent:
    async def invoke(self, prompt, context):
        return prompt


class EchoModel:
    async def invoke(self, messages):
        from langchain_core.messages import AIMessage

        return AIMessage(content=messages[-1].content)


def serve(url, key, project, module_id, agent, model):
    from naas_abi_sdk.discovery import (
        AgentDescriptor,
        DiscoveryConfiguration,
        ModelDescriptor,
    )
    from naas_abi_sdk.module import BaseModule, ModuleDependencies, run_module
    from naas_abi_sdk.service_token import ModuleToken

    class Bench(BaseModule):
        dependencies = ModuleDependencies(services=("document",))
        agents = (
            AgentDescriptor(agent, "says the prompt back", 1, ("agent.invoke.v1",)),
        )
        models = (ModelDescriptor(model, "says the last message back"),)

        def on_initialized(self):
            self.expose_agent(agent, EchoAgent())
            self.expose_model(model, EchoModel())

        async def run(self):
            print("ready", flush=True)
            await asyncio.Event().wait()

    Bench.module_id = module_id
    asyncio.run(
        run_module(
            Bench,
            url=url,
            token=ModuleToken(module_id, key),
            discovery=DiscoveryConfiguration(project=project),
            drain_timeout_seconds=10,
        )
    )


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command != "serve":
        sys.exit(f"unknown command {command!r}")
    serve(*args)


if __name__ == "__main__":
    main()
