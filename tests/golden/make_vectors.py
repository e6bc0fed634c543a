"""Writes the golden wire vectors: one serialized message per file.

The bytes come from the reference's own generated classes
(naas_abi_proto 0.2.0, protobuf's upb backend), so they are what a Python peer
puts on the wire. crates/abi-proto/tests/it/golden.rs builds the same values in
Rust, decodes each file and re-encodes it, so any drift between our .proto
files and the reference shows up as a failing test.

Usage: python make_vectors.py [--out DIR]   (default: ./vectors next to this file)

Every message of abi.common.v1 and abi.discovery.v1 appears at least twice:
`<message>_empty` (all defaults, zero bytes) and `<message>_full` (every field
set). Variants cover integer limits, doubles, unicode, repeated fields with
several items and the optional `CallError.status` (present with 0, absent).
Keep the values in step with golden.rs: a vector without a Rust counterpart
fails that test.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pathlib
import re

from naas_abi_proto.common.v1 import common_pb2 as common
from naas_abi_proto.discovery.v1 import discovery_pb2 as pb

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
U32_MAX, U64_MAX = 2**32 - 1, 2**64 - 1
LEASE_TOKEN = "tok-" + "0123456789abcdef" * 4
LEASE_HASH = hashlib.sha256(LEASE_TOKEN.encode()).hexdigest()


def context() -> common.CallContext:
    return common.CallContext(
        trace_id="trace-0123456789abcdef",
        timeout_ms=1500,
        principal_id="user:alice",
        workspace_id="ws-42",
        tenant_id="tenant-é",
    )


def call_error() -> common.CallError:
    return common.CallError(
        code="DEPENDENCY_CYCLE",
        message="Required modules form a cycle",
        retryable=True,
        status=503,
    )


def agent(name: str = "summarizer") -> pb.AgentDescriptor:
    return pb.AgentDescriptor(
        name=name,
        description="Sums up 📄 文档",
        contract_major=3,
        capabilities=["agent.invoke.v1", "agent.stream.v1", "x:y-z"],
    )


def trigger(kind: str) -> pb.JobTrigger:
    specs = {
        "cron": pb.JobTrigger(
            kind="cron",
            spec="0 30 9 * * 1-5",
            time_zone="Europe/Paris",
            filter="",
            input='{"report": "daily"}',
        ),
        "every": pb.JobTrigger(kind="every", spec="1h", input="{}"),
        "event": pb.JobTrigger(
            kind="event",
            spec="abi.events.orders.created",
            filter='{"region": "eu"}',
        ),
    }
    return specs[kind]


def trigger_full() -> pb.JobTrigger:
    return pb.JobTrigger(
        kind="cron",
        spec="*/5 * * * * *",
        time_zone="America/New_York",
        filter='{"a": 1}',
        input='{"b": [1, 2, 3]}',
    )


def job(name: str = "nightly-report") -> pb.JobDescriptor:
    return pb.JobDescriptor(
        name=name,
        description="Builds the nightly report",
        contract_major=2,
        triggers=[trigger("cron"), trigger("every"), trigger("event")],
        max_concurrency=4,
        max_attempts=3,
        timeout_seconds=12.5,
        kind="workflow",
        input_schema='{"type": "object"}',
        output_schema='{"type": "object", "properties": {"ok": {"type": "boolean"}}}',
    )


def dependency(module_id: str = "billing", major: int = 2) -> pb.Dependency:
    return pb.Dependency(module_id=module_id, contract_major=major)


def model(name: str = "gpt-local") -> pb.ModelDescriptor:
    return pb.ModelDescriptor(name=name, description="A local chat model", kind="chat")


def app(name: str = "dashboard") -> pb.AppDescriptor:
    return pb.AppDescriptor(
        name=name,
        title="Dashboard",
        description="Shows the numbers",
        category="analytics",
        icon_emoji="📊",
        entry="pages/index.html",
        contract_major=1,
        max_upload_bytes=10 * 1024 * 1024,
    )


def descriptor() -> pb.ModuleDescriptor:
    return pb.ModuleDescriptor(
        module_id="orders",
        package_version="1.4.0-rc.1+build.7",
        contract_major=5,
        dependencies=[dependency("billing", 2), dependency("users", 1), dependency("ns:mail", 7)],
        agents=[agent("summarizer"), agent("planner")],
        jobs=[job("nightly-report"), job("cleanup")],
        models=[model("gpt-local"), model("small")],
        apps=[app("dashboard"), app("admin")],
    )


def instance() -> pb.Instance:
    return pb.Instance(
        descriptor=descriptor(),
        instance_id="orders-7f3a",
        status="READY",
        expires_at=1764400000.123456,
        rollout_id="deploy-2026-11-29",
    )


def small_instance(instance_id: str, status: str, expires_at: float) -> pb.Instance:
    return pb.Instance(
        descriptor=pb.ModuleDescriptor(module_id="users", contract_major=1),
        instance_id=instance_id,
        status=status,
        expires_at=expires_at,
    )


def record() -> pb.RegistryRecord:
    return pb.RegistryRecord(
        instance=instance(),
        owner="orders",
        lease_hash=LEASE_HASH,
        initialized=True,
        draining=True,
        rollout_id="deploy-2026-11-29",
        registered_at=1764399980.5,
        rollout_modules=["billing", "orders", "users"],
    )


def vectors() -> dict[str, object]:
    v: dict[str, object] = {}

    # abi.common.v1
    v["call_context_empty"] = common.CallContext()
    v["call_context_full"] = context()
    v["call_context_i32_min"] = common.CallContext(trace_id="t", timeout_ms=I32_MIN)
    v["call_context_i32_max"] = common.CallContext(trace_id="t", timeout_ms=I32_MAX)
    v["call_context_unicode"] = common.CallContext(
        trace_id="🚀追踪-ID",
        principal_id="用户👩‍💻",
        workspace_id="Ωμέγα",
        tenant_id="テナント",
    )
    v["call_error_empty"] = common.CallError()
    v["call_error_full"] = call_error()
    v["call_error_status_zero"] = common.CallError(code="UNAVAILABLE", status=0)
    v["call_error_status_absent"] = common.CallError(
        code="INVALID_ARGUMENT", message="Invalid rollout id"
    )
    v["call_error_status_i32_min"] = common.CallError(code="X", status=I32_MIN)
    v["call_error_status_i32_max"] = common.CallError(code="X", status=I32_MAX)

    # abi.discovery.v1: descriptors
    v["agent_descriptor_empty"] = pb.AgentDescriptor()
    v["agent_descriptor_full"] = agent()
    v["agent_descriptor_u32_max"] = pb.AgentDescriptor(name="a", contract_major=U32_MAX)
    v["job_trigger_empty"] = pb.JobTrigger()
    v["job_trigger_full"] = trigger_full()
    v["job_descriptor_empty"] = pb.JobDescriptor()
    v["job_descriptor_full"] = job()
    v["job_descriptor_u32_max"] = pb.JobDescriptor(
        name="j", contract_major=U32_MAX, max_concurrency=U32_MAX, max_attempts=U32_MAX
    )
    v["job_descriptor_negative_double"] = pb.JobDescriptor(name="j", timeout_seconds=-1.5)
    v["job_descriptor_fraction_double"] = pb.JobDescriptor(name="j", timeout_seconds=0.1)
    v["job_descriptor_tiny_double"] = pb.JobDescriptor(name="j", timeout_seconds=5e-324)
    v["job_descriptor_max_double"] = pb.JobDescriptor(
        name="j", timeout_seconds=1.7976931348623157e308
    )
    v["job_descriptor_infinity"] = pb.JobDescriptor(name="j", timeout_seconds=math.inf)
    v["job_descriptor_neg_infinity"] = pb.JobDescriptor(name="j", timeout_seconds=-math.inf)
    v["job_descriptor_nan"] = pb.JobDescriptor(name="j", timeout_seconds=math.nan)
    # Python writes -0.0 (its bits are not zero); prost treats it as the
    # default and leaves it out when encoding. golden.rs pins that difference.
    v["job_descriptor_negative_zero"] = pb.JobDescriptor(name="j", timeout_seconds=-0.0)
    v["dependency_empty"] = pb.Dependency()
    v["dependency_full"] = dependency()
    v["dependency_u32_max"] = dependency("m", U32_MAX)
    v["model_descriptor_empty"] = pb.ModelDescriptor()
    v["model_descriptor_full"] = model()
    v["app_descriptor_empty"] = pb.AppDescriptor()
    v["app_descriptor_full"] = app()
    v["app_descriptor_max"] = pb.AppDescriptor(
        name="big", contract_major=U32_MAX, max_upload_bytes=U64_MAX
    )
    v["module_descriptor_empty"] = pb.ModuleDescriptor()
    v["module_descriptor_full"] = descriptor()
    v["module_descriptor_unicode"] = pb.ModuleDescriptor(
        module_id="模块",
        package_version="版本-🦀",
        contract_major=1,
        agents=[pb.AgentDescriptor(name="エージェント", description="😀😃😄", contract_major=1)],
    )
    v["instance_empty"] = pb.Instance()
    v["instance_full"] = instance()

    # abi.discovery.v1: requests and responses
    v["register_request_empty"] = pb.RegisterRequest()
    v["register_request_full"] = pb.RegisterRequest(
        context=context(),
        descriptor=descriptor(),
        instance_id="orders-7f3a",
        lease_token=LEASE_TOKEN,
        rollout_id="deploy-2026-11-29",
        rollout_modules=["orders", "billing", "users"],
    )
    v["register_response_empty"] = pb.RegisterResponse()
    v["register_response_full"] = pb.RegisterResponse(
        error=call_error(), instance=instance(), lease_seconds=19.999998092651367
    )
    v["register_response_ok"] = pb.RegisterResponse(instance=instance(), lease_seconds=20.0)
    v["renew_request_empty"] = pb.RenewRequest()
    v["renew_request_full"] = pb.RenewRequest(
        context=context(),
        instance_id="orders-7f3a",
        lease_token=LEASE_TOKEN,
        initialized=True,
        draining=True,
    )
    v["renew_response_empty"] = pb.RenewResponse()
    v["renew_response_full"] = pb.RenewResponse(
        error=call_error(), instance=instance(), lease_seconds=20.0
    )
    v["unregister_request_empty"] = pb.UnregisterRequest()
    v["unregister_request_full"] = pb.UnregisterRequest(
        context=context(), instance_id="orders-7f3a", lease_token=LEASE_TOKEN
    )
    v["unregister_response_empty"] = pb.UnregisterResponse()
    v["unregister_response_full"] = pb.UnregisterResponse(error=call_error())
    v["get_module_request_empty"] = pb.GetModuleRequest()
    v["get_module_request_full"] = pb.GetModuleRequest(
        context=context(), module_id="orders", contract_major=5
    )
    v["get_module_response_empty"] = pb.GetModuleResponse()
    v["get_module_response_full"] = pb.GetModuleResponse(
        error=call_error(),
        instances=[
            instance(),
            small_instance("users-1", "STARTING", 100.25),
            small_instance("users-2", "DRAINING", -3.75),
        ],
    )
    v["list_modules_request_empty"] = pb.ListModulesRequest()
    v["list_modules_request_full"] = pb.ListModulesRequest(
        context=context(), limit=100, after_instance_id="orders-7f3a"
    )
    v["list_modules_request_u32_max"] = pb.ListModulesRequest(limit=U32_MAX)
    v["list_modules_response_empty"] = pb.ListModulesResponse()
    v["list_modules_response_full"] = pb.ListModulesResponse(
        error=call_error(),
        instances=[small_instance("users-1", "STAGED", 1.5), small_instance("users-2", "DEGRADED", 2.5)],
        next_after_instance_id="users-2",
    )
    v["evict_request_empty"] = pb.EvictRequest()
    v["evict_request_full"] = pb.EvictRequest(context=context(), instance_id="orders-7f3a")
    v["evict_response_empty"] = pb.EvictResponse()
    v["evict_response_full"] = pb.EvictResponse(error=call_error(), instance=instance())

    # abi.discovery.v1: the stored snapshot
    v["registry_record_empty"] = pb.RegistryRecord()
    v["registry_record_full"] = record()
    v["registry_state_empty"] = pb.RegistryState()
    v["registry_state_full"] = pb.RegistryState(
        records=[
            record(),
            pb.RegistryRecord(
                instance=small_instance("users-1", "STARTING", 1764400020.0),
                owner="users",
                lease_hash=LEASE_HASH,
                registered_at=1764400000.0,
            ),
            pb.RegistryRecord(),
        ]
    )

    # abi.discovery.v1: authorizations
    v["authorize_agent_request_empty"] = pb.AuthorizeAgentRequest()
    v["authorize_agent_request_full"] = pb.AuthorizeAgentRequest(
        context=context(),
        instance_id="orders-7f3a",
        lease_token=LEASE_TOKEN,
        agent_name="summarizer",
        caller_token="eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
        new_invocation=True,
    )
    v["authorize_agent_response_empty"] = pb.AuthorizeAgentResponse()
    v["authorize_agent_response_full"] = pb.AuthorizeAgentResponse(
        error=call_error(), caller_identity="engine", caller_admin=True
    )
    v["authorize_model_request_empty"] = pb.AuthorizeModelRequest()
    v["authorize_model_request_full"] = pb.AuthorizeModelRequest(
        context=context(),
        instance_id="orders-7f3a",
        lease_token=LEASE_TOKEN,
        model_name="gpt-local",
        caller_token="eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
    )
    v["authorize_model_response_empty"] = pb.AuthorizeModelResponse()
    v["authorize_model_response_full"] = pb.AuthorizeModelResponse(
        error=call_error(), caller_identity="api", caller_admin=True
    )
    v["authorize_app_request_empty"] = pb.AuthorizeAppRequest()
    v["authorize_app_request_full"] = pb.AuthorizeAppRequest(
        context=context(),
        instance_id="orders-7f3a",
        lease_token=LEASE_TOKEN,
        app_name="dashboard",
        caller_token="eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
    )
    v["authorize_app_response_empty"] = pb.AuthorizeAppResponse()
    v["authorize_app_response_full"] = pb.AuthorizeAppResponse(
        error=call_error(), caller_identity="orders", caller_admin=False
    )
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=pathlib.Path, default=pathlib.Path(__file__).parent / "vectors"
    )
    out = parser.parse_args().out
    made = vectors()
    # Every message of both packages must have an empty and a full vector.
    for package in (common, pb):
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
