"""Writes the golden wire vectors of abi.agent.v1 and abi.model_registry.v1.

Same method as make_vectors.py: one message per file, serialized by the
reference's generated classes (naas_abi_proto 0.2.0).
crates/abi-proto/tests/it/golden_agent_model.rs builds the same values in
Rust and compares bytes both ways.

Usage: python make_agent_model_vectors.py [--out DIR]
(default: ./agent_model_vectors next to this file)

Every message of both packages has `<message>_empty` and `<message>_full`;
variants cover the optional `chat_source` (absent, true, false), integer
limits, unicode, bytes that are not UTF-8 and several repeated items.
"""

from __future__ import annotations

import argparse
import pathlib
import re

from naas_abi_proto.agent.v1 import agent_pb2 as agent
from naas_abi_proto.common.v1 import common_pb2 as common
from naas_abi_proto.model_registry.v1 import model_registry_pb2 as model

U32_MAX, U64_MAX = 2**32 - 1, 2**64 - 1


def context() -> common.CallContext:
    return common.CallContext(
        trace_id="trace-agents",
        timeout_ms=30000,
        principal_id="user:bob",
        workspace_id="ws-7",
        tenant_id="tenant-ü",
    )


def call_error() -> common.CallError:
    return common.CallError(
        code="AGENT_BUSY", message="Agent is busy", retryable=True, status=503
    )


def event(sequence: int, chat_source: bool | None) -> agent.AgentEvent:
    e = agent.AgentEvent(sequence=sequence, event="message", data="héllo 🌍", parts=3)
    if chat_source is not None:
        e.chat_source = chat_source
    return e


def invocation() -> agent.Invocation:
    return agent.Invocation(
        invocation_id="inv:2026-12-01.a_b-c",
        thread_id="thread-1",
        status="SUCCEEDED",
        result="done ✓",
        error_code="TIMED_OUT",
        error_message="Run exceeded its deadline",
        owner_instance_id="provider-a1b2",
        owner_available=True,
        events=[event(1, None), event(2, False), event(U64_MAX, True)],
        last_sequence=U64_MAX,
        result_parts=U32_MAX,
    )


def model_ref() -> model.ModelRef:
    return model.ModelRef(
        canonical_id="echo-chat", provider="acme.models", kind="chat", model_id="echo:v1"
    )


def chat_message(kind: str = "human") -> model.ChatMessage:
    return model.ChatMessage(
        type=kind, data_json=b'{"content":"hi \\u00e9","type":"' + kind.encode() + b'"}'
    )


def chat_request() -> model.ChatRequest:
    return model.ChatRequest(
        context=context(),
        ref=model_ref(),
        messages=[chat_message("system"), chat_message("human"), chat_message("ai")],
        stop=["\n\n", "END"],
        options_json=b'{"temperature":0.2}',
        tools_json=[b'{"name":"search"}', b'{"name":"calc"}'],
        tool_options_json=b'{"tool_choice":"auto"}',
    )


def descriptor() -> model.ModelDescriptor:
    return model.ModelDescriptor(
        ref=model_ref(),
        model_id="echo:v1",
        name="Echo",
        description="Repeats 📣",
        metadata_json=b'{"context_window":8192}',
    )


def vectors() -> dict[str, object]:
    v: dict[str, object] = {}
    for package in (agent, model):
        for type_name, message_type in package.DESCRIPTOR.message_types_by_name.items():
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", type_name).lower()
            v[f"{snake}_empty"] = getattr(package, type_name)()
    # abi.agent.v1
    v["agent_event_full"] = event(7, False)
    v["agent_event_chat_source_true"] = event(1, True)
    v["agent_event_chat_source_absent"] = event(1, None)
    v["invocation_full"] = invocation()
    v["submit_request_full"] = agent.SubmitRequest(
        context=context(),
        invocation_id="inv-1",
        thread_id="conversation 💬",
        prompt="Summarize:\n" + "x" * 300,
        mode="stream",
        deadline_seconds=3600,
        output_format=2,
        updates_inbox="_INBOX_MODULES.abc.def",
    )
    v["run_update_full"] = agent.RunUpdate(
        event=event(5, None), status="SUCCEEDED", last_sequence=5
    )
    v["run_update_status_only"] = agent.RunUpdate(status="CANCELLED", last_sequence=9)
    v["submit_response_full"] = agent.SubmitResponse(
        error=call_error(), invocation=invocation()
    )
    v["status_request_full"] = agent.StatusRequest(
        context=context(), invocation_id="inv-1", after_sequence=U64_MAX, output_format=2
    )
    v["status_response_full"] = agent.StatusResponse(
        error=call_error(), invocation=invocation()
    )
    v["cancel_request_full"] = agent.CancelRequest(
        context=context(), invocation_id="inv-1", output_format=2
    )
    v["cancel_response_full"] = agent.CancelResponse(
        error=call_error(), invocation=invocation()
    )
    v["event_request_full"] = agent.EventRequest(
        context=context(), invocation_id="inv-1", sequence=3, part=U32_MAX
    )
    v["event_response_full"] = agent.EventResponse(
        error=call_error(), data=bytes(range(256))
    )
    # abi.model_registry.v1
    v["model_ref_full"] = model_ref()
    v["model_descriptor_full"] = descriptor()
    v["chat_message_full"] = chat_message("tool")
    v["list_models_request_full"] = model.ListModelsRequest(context=context())
    v["list_models_response_full"] = model.ListModelsResponse(
        models=[descriptor(), descriptor()],
        default_chat_model_id="echo:v1",
        default_embedding_model_id="embed:v2",
        error=call_error(),
    )
    v["resolve_request_full"] = model.ResolveRequest(context=context(), ref=model_ref())
    v["resolve_response_full"] = model.ResolveResponse(
        model=descriptor(), error=call_error()
    )
    v["chat_request_full"] = chat_request()
    v["chat_response_full"] = model.ChatResponse(
        message=chat_message("ai"), error=call_error()
    )
    v["stream_open_request_full"] = model.StreamOpenRequest(
        context=context(), chat=chat_request()
    )
    v["stream_open_response_full"] = model.StreamOpenResponse(
        stream_id="stream-1", error=call_error()
    )
    v["stream_next_request_full"] = model.StreamNextRequest(
        context=context(), stream_id="stream-1", sequence=U64_MAX
    )
    v["stream_next_response_full"] = model.StreamNextResponse(
        chunk=chat_message("AIMessageChunk"), done=True, sequence=4, error=call_error()
    )
    v["stream_close_request_full"] = model.StreamCloseRequest(
        context=context(), stream_id="stream-1"
    )
    v["stream_close_response_full"] = model.StreamCloseResponse(error=call_error())
    v["embed_request_full"] = model.EmbedRequest(
        context=context(), ref=model_ref(), texts=["a", "bé", ""], query=True
    )
    v["vector_full"] = model.Vector(values=[0.0, -1.5, 1e-300, 3.141592653589793])
    v["embed_response_full"] = model.EmbedResponse(
        vectors=[model.Vector(values=[1.0, 2.0]), model.Vector(values=[-0.25])],
        error=call_error(),
    )
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path(__file__).parent / "agent_model_vectors",
    )
    out = parser.parse_args().out
    made = vectors()
    for package in (agent, model):
        for type_name, message_type in package.DESCRIPTOR.message_types_by_name.items():
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", type_name).lower()
            for suffix in ("empty", "full"):
                name = f"{snake}_{suffix}"
                assert name in made, f"no vector {name}"
                assert made[name].DESCRIPTOR is message_type, f"{name} is not a {type_name}"
    out.mkdir(parents=True, exist_ok=True)
    for name, message in made.items():
        (out / f"{name}.bin").write_bytes(message.SerializeToString(deterministic=True))


if __name__ == "__main__":
    main()
