"""Differential harness: operation sequences run through the Python reference.

Generates operation sequences (from a seed, or the fixed scenarios below), runs
each one through the reference ``DiscoveryService`` (naas-abi-core 3.1.0) one
operation at a time, and prints JSON lines:

  {"seq": "7:12", "i": 3, "op": "register", "owner": "o1", "now": 1000.5,
   "note": "...", "request": {...}, "expect": {...}}

one per operation (the last of a random sequence is "view": every live
record with its computed status), then one per sequence with the stored
snapshot:

  {"seq": "7:12", "i": 40, "op": "snapshot", "now": ..., "expect": {"snapshot": "<hex>"}}

``request`` holds the request's proto fields under their proto names, every
field written (absent sub-messages left out), as plain JSON numbers, so serde
decodes it straight into the prost types. A request holding a double JSON
cannot carry (NaN, infinities) also carries ``request_hex`` (its serialized
bytes); the replay driver then decodes that instead.

``expect`` is ``{"ok": true, "response": "<hex of SerializeToString>"}`` or
``{"ok": false, "code": "<error code>", "message": "<str(DiscoveryError)>"}``.

The service runs the way the NATS endpoint runs it: an in-memory registry port
(bytes plus a revision, compare-and-swap), a fake clock that stands still
during an operation, lease 20 s, admin identities ("api", "engine"), and
``snapshot_seconds=0`` so authorize calls always read the registry.

Usage:
  reference.py --seed N [--sequences K]   random sequences N:0 .. N:K-1
  reference.py --seed N --only I          sequence N:I alone (each is seeded on its own)
  reference.py --fixed                    the hand-written scenarios
  reference.py --differences              one scenario per deliberate difference
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
from typing import Any, Callable

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from naas_abi_core.services.discovery.discovery_ports import RevisionConflict
from naas_abi_core.services.discovery.discovery_service import (
    DiscoveryError,
    DiscoveryService,
)
from naas_abi_proto.discovery.v1 import discovery_pb2 as pb

LEASE_SECONDS = 20.0
ADMINS = ("api", "engine")

# Every line carries "lease_seconds" and "admins" when the sequence's service
# was built with a lease other than LEASE_SECONDS or admins other than ADMINS.

# Where our implementation deliberately differs from the reference, or where
# the harness cannot carry a value across. The generator never produces these
# cases (each key names the generator's case it removes); the replay would
# otherwise report them as mismatches. Keep in step with the README.
DIFFERENCES: dict[str, str] = {
    "negative-zero-timeout": (
        "A job's timeout_seconds of -0.0 is valid on both sides, but Python "
        "serializes -0.0 (its bits are not zero) while prost leaves it out like "
        "+0.0, so the stored snapshot and the answers differ by that one field; "
        "and Python's message equality tells -0.0 from 0.0, so a replica (or a "
        "retry) declaring the other zero is a DESCRIPTOR_CONFLICT there, while "
        "we register it (comparing bits would not help: prost cannot keep -0.0 "
        "through the stored snapshot). Pinned by the golden vector "
        "job_descriptor_negative_zero."
    ),
    "json-nesting-at-python-recursion-limit": (
        "A job schema or trigger input nested about 1000 levels deep makes "
        "Python's json.loads raise RecursionError (the exact depth depends on "
        "the interpreter's call stack), which the reference does not turn into "
        "a DiscoveryError: the caller gets an internal error. We accept up to "
        "1000 levels and refuse deeper ones with INVALID_ARGUMENT. The "
        "generator stays at or under 900 levels, where both sides agree."
    ),
    "unknown-fields": (
        "Python's protobuf keeps fields it does not know (from a newer peer's "
        "descriptor) and compares them: the reference stores them in the "
        "snapshot and a re-registration without them is a DESCRIPTOR_CONFLICT. "
        "prost drops unknown fields when decoding, so we neither store nor "
        "compare them. Requests here only use fields of naas-abi-proto 0.2.0."
    ),
    "clock-off-grid": (
        "Harness only: clock values stay on a 1/8 s grid so their JSON decimal "
        "form parses to the same double in serde_json (which rounds long "
        "decimals on a best-effort basis) as in Python. The rules' arithmetic "
        "on them (now + lease, expires_at - now) is still compared bit for bit."
    ),
}

Expect = dict[str, Any]


class MemoryRegistry:
    """The RegistryPort: one value with a revision, written by compare-and-swap."""

    def __init__(self) -> None:
        self.data, self.revision = b"", 0

    async def read(self) -> tuple[bytes, int]:
        return self.data, self.revision

    async def compare_and_swap(self, data: bytes, revision: int) -> None:
        if revision != self.revision:
            raise RevisionConflict()
        self.data, self.revision = data, revision + 1


class NotJson(Exception):
    """The message holds a double JSON cannot carry."""


def to_json(message: Message) -> dict[str, Any]:
    """Every field under its proto name, as prost's serde derive reads it."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        repeated = field.is_repeated
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if repeated:
                out[field.name] = [to_json(item) for item in value]
            elif message.HasField(field.name):
                out[field.name] = to_json(value)
            continue
        if field.has_presence and not message.HasField(field.name):
            continue  # `optional` scalar left unset: serde's None
        items = list(value) if repeated else [value]
        for item in items:
            if isinstance(item, float) and not math.isfinite(item):
                raise NotJson(field.name)
        out[field.name] = items if repeated else value
    return out


def error(exc: DiscoveryError) -> Expect:
    return {"ok": False, "code": exc.code, "message": str(exc)}


class Harness:
    """One reference service over a fresh registry, with its clock."""

    def __init__(
        self,
        seq: str,
        now: float,
        out: list[str],
        lease: float = LEASE_SECONDS,
        admins: tuple[str, ...] = ADMINS,
    ) -> None:
        self.seq, self.now, self.out, self.index = seq, now, out, 0
        self.lease, self.admins = lease, admins
        self.registry = MemoryRegistry()
        self.service = DiscoveryService(
            self.registry,
            lease_seconds=lease,
            clock=lambda: self.now,
            admin_identities=admins,
            snapshot_seconds=0,
        )
        self.codes: dict[str, int] = {}

    async def call(
        self,
        op: str,
        request: Message,
        owner: str = "",
        note: str = "",
        difference: str = "",
        bytes_only: bool = False,
    ) -> Expect:
        """Runs one operation, records it with the reference's answer.

        ``difference`` marks an operation written to show a DIFFERENCES entry:
        the line names it, the request always travels as bytes (so unknown
        fields survive), and an internal error is recorded instead of raised.
        ``bytes_only`` says both sides give the same answer, encoded apart.
        """
        service = self.service
        calls: dict[str, Callable[[], Any]] = {
            "register": lambda: service.register(request, owner),
            "renew": lambda: service.renew(request, owner),
            "unregister": lambda: service.unregister(request, owner),
            "evict": lambda: service.evict(request, owner),
            "get_module": lambda: service.get_module(request),
            "list_modules": lambda: service.list_modules(request),
            "authorize_agent": lambda: service.authorize_agent(request, owner),
            "authorize_model": lambda: service.authorize_model(request, owner),
            "authorize_app": lambda: service.authorize_app(request, owner),
            "view": lambda: self.view(),
        }
        try:
            response = await calls[op]()
            expect: Expect = {"ok": True, "response": response.SerializeToString().hex()}
            self.codes["OK"] = self.codes.get("OK", 0) + 1
        except DiscoveryError as exc:
            expect = error(exc)
            self.codes[exc.code] = self.codes.get(exc.code, 0) + 1
        except RecursionError as exc:
            if not difference:
                raise
            expect = {"ok": False, "code": "RecursionError", "message": str(exc)}
        line: dict[str, Any] = {
            "seq": self.seq,
            "i": self.index,
            "op": op,
            "owner": owner,
            "now": self.now,
        }
        if self.lease != LEASE_SECONDS:
            line["lease_seconds"] = self.lease
        if self.admins != ADMINS:
            line["admins"] = list(self.admins)
        if note:
            line["note"] = note
        if difference:
            line["difference"] = difference
        if bytes_only:
            line["bytes_only"] = True
        try:
            line["request"] = to_json(request)
            if difference:
                line["request_hex"] = request.SerializeToString().hex()
        except NotJson:
            line["request"] = {}
            line["request_hex"] = request.SerializeToString().hex()
        line["expect"] = expect
        self.out.append(json.dumps(line, ensure_ascii=False))
        self.index += 1
        return expect

    def finish(self, difference: str = "", bytes_only: bool = False) -> None:
        """Closes the sequence with the stored snapshot."""
        line: dict[str, Any] = {
            "seq": self.seq,
            "i": self.index,
            "op": "snapshot",
            "now": self.now,
            "expect": {"snapshot": self.registry.data.hex()},
        }
        if difference:
            line["difference"] = difference
        if bytes_only:
            line["bytes_only"] = True
        self.out.append(json.dumps(line))

    def snapshot(self) -> pb.RegistryState:
        return pb.RegistryState.FromString(self.registry.data)

    async def view(self) -> pb.RegistryState:
        """What every lookup sees: the live records, statuses computed (the
        reference's own ``_read`` filter and ``_ready``); abi_registry::view."""
        state = self.snapshot()
        live = pb.RegistryState(records=[r for r in state.records if r.instance.expires_at > self.now])
        self.service._ready(live)
        return live


# ---------------------------------------------------------------- generation

# Objects to Python's json (so valid schemas and trigger inputs), though some
# are not strict JSON.
VALID_JSON_VALUES = [
    "",
    "{}",
    '{"type": "object"}',
    ' {"a": [1, 2.5, "x", null, true]} ',
    '{"a": 1, "a": 2}',  # duplicate keys: the last wins, still an object
    '{"a": NaN}',  # Python's json reads NaN and Infinity literals
    '{"a": Infinity, "b": -Infinity}',
    '{"a": 1e400}',  # out of double range: Python reads inf
    '{"big": 123456789012345678901234567890}',
    '{"esc": "\\u00e9\\ud83d\\ude00"}',
    '{"lone": "\\ud800"}',  # a lone surrogate escape
    '{"u": "é😀"}',
    '{"d": ' + "[" * 90 + "]" * 90 + "}",  # 91 levels deep
    '{"x": -0.0, "y": 1E+2, "z": 0.5e-3}',
    "\t\n{}\r\n",
    '{"a": "\\/", "b": "\x7f", "c": "\u2028"}',
    '{"a": -0, "b": 1E-7}',
    '{"\\ud800": 1, "a": "\\uDFFF\\uD800"}',
]
# Long enough that only a 16 KiB schema can hold them: Python's json turns
# digits into an int (at most 4300 digits) but reads any float.
LONG_JSON_VALUES = [
    '{"a": ' + "1" * 4300 + "}",
    '{"a": ' + "1" * 4301 + "}",
    '{"a": -' + "1" * 4300 + "}",
    '{"a": -' + "1" * 4301 + "}",
    '{"a": ' + "1" * 5000 + ".5}",
    '{"a": ' + "1" * 5000 + "e1}",
    '{"a": ' + "[" * 500 + "]" * 500 + "}",
    '{"a": ' + "[" * 900 + "]" * 900 + "}",
]
# Not JSON to Python's json, or not an object.
INVALID_JSON_VALUES = [
    "[]",
    "null",
    "1",
    '"{}"',
    "{",
    "{}x",
    "{'a': 1}",
    '{"a": 1,}',
    '{"a": "\x01"}',  # a raw control character in a string
    "\ufeff{}",  # a byte order mark
    '{"a": nan}',
    '{"a": 01}',
    "{} {}",
    '{"a": 1.}',
    '{"a": .5}',
    '{"a": -NaN}',
    '{"a": +1}',
    '{"a": "\\x"}',
    '{"a":\u00a0 1}',
    '{"a": -}',
    '{"a": 1e}',
    '{"a": 0001}',
    '{"a": "\\u12"}',
    '{"a": Infinityx}',
    '{"a": NaN1}',
    '{"a": 1}\x00',
]


class Generator:
    """Random operation sequences over small pools, so operations collide."""

    def __init__(self, rng: random.Random, harness: Harness) -> None:
        self.rng, self.h = rng, harness
        count = rng.choice([2, 3, 3, 4, 5])
        self.modules = ["a", "b", "c", "d", "e"][:count]
        self.ids = [f"i{n}" for n in range(rng.choice([3, 5, 8]))]
        self.rollouts = ["r1", "r2", "r3"]
        # How often a registration is followed by its initialized renewal.
        self.eager = rng.choice([0.0, 0.3, 0.7])
        # Some sequences are mostly rollouts of a few modules that come up at
        # once: generations then stage, cut over, drain and break often.
        self.rollout_share, self.bad_share = 0.5, 0.25
        if rng.random() < 0.3:
            self.rollout_share, self.bad_share, self.eager = 0.85, 0.05, 0.8
            self.rollouts = ["r1", "r2", "r3", "r4", "r5"]
        self.designs: dict[tuple[str, int, str], pb.ModuleDescriptor] = {}
        self.cohorts: dict[str, list[str]] = {}
        # instance id -> the last request and owner the reference accepted.
        self.known: dict[str, tuple[pb.RegisterRequest, str]] = {}
        self.tokens: dict[str, str] = {}
        # Instances unregistered, evicted or found expired, with their lease.
        self.gone: dict[str, tuple[pb.RegisterRequest, str]] = {}
        # Where the last list_modules page said the next one starts.
        self.next_page = ""

    # -- values

    def token(self, instance_id: str) -> str:
        if instance_id not in self.tokens or self.rng.random() < 0.05:
            self.tokens[instance_id] = f"lease-{self.rng.getrandbits(64):016x}-{instance_id}".ljust(32, "x")
        return self.tokens[instance_id]

    def job(self, name: str = "job") -> pb.JobDescriptor:
        r = self.rng
        return pb.JobDescriptor(
            name=name,
            contract_major=1,
            max_concurrency=r.choice([1, 4, 64]),
            max_attempts=r.choice([1, 3, 100]),
            timeout_seconds=r.choice([0.0, 1.5, 30.0, 0.125]),
            kind=r.choice(["", "job", "workflow"]),
            triggers=[pb.JobTrigger(kind="every", spec="1h")] if r.random() < 0.5 else [],
            input_schema=r.choice(VALID_JSON_VALUES),
        )

    def design(self, module: str, major: int, rollout: str) -> pb.ModuleDescriptor:
        """The descriptor this generation declares; rarely a conflicting one."""
        key = (module, major, rollout)
        r = self.rng
        if key not in self.designs or r.random() < 0.05:
            d = pb.ModuleDescriptor(
                module_id=module,
                package_version=r.choice(["", "1.0.0", "2.0.0-rc.1"]),
                contract_major=major,
            )
            others = [m for m in self.modules if m != module or r.random() < 0.05]
            for dep in r.sample(others, k=min(len(others), r.choice([0, 0, 1, 1, 2]))):
                d.dependencies.add(module_id=dep, contract_major=1 if r.random() < 0.85 else 2)
            if r.random() < 0.5:
                caps = ["agent.invoke.v1"] if r.random() < 0.8 else ["agent.stream.v1"]
                d.agents.add(name="chat", contract_major=1, capabilities=caps)
            if r.random() < 0.2:
                d.jobs.append(self.job())
            if r.random() < 0.5:
                d.models.add(name="m", kind="chat")
            if r.random() < 0.5:
                d.apps.add(name="web", contract_major=1, entry=r.choice(["", "index.html"]))
            self.designs[key] = d
        copy = pb.ModuleDescriptor()
        copy.CopyFrom(self.designs[key])
        return copy

    def cohort(self, module: str, rollout: str) -> list[str]:
        """The rollout's module ids (empty: this module alone), in any order;
        rarely a changed or self-less one, which the rules refuse."""
        r = self.rng
        if rollout not in self.cohorts or r.random() < 0.05:
            choice = r.random()
            if choice < 0.4:
                cohort: list[str] = []
            else:
                cohort = r.sample(self.modules, k=r.randint(1, len(self.modules)))
            self.cohorts[rollout] = cohort
        cohort = list(self.cohorts[rollout])
        if cohort and module not in cohort and r.random() < 0.9:
            cohort.append(module)
        r.shuffle(cohort)
        return cohort

    def owner(self) -> str:
        """A caller identity: opaque to the rules, so any string will do."""
        return self.rng.choice(["o1", "o1", "o1", "o1", "o2", "api", "", "ö"])

    def valid_register(self) -> tuple[pb.RegisterRequest, str, str]:
        r = self.rng
        kind = r.random()
        if kind < 0.2 and self.known:
            # The same registration again (idempotent), sometimes changed.
            instance_id = r.choice(sorted(self.known))
            old, owner = self.known[instance_id]
            req = pb.RegisterRequest()
            req.CopyFrom(old)
            note = "register again"
            if r.random() < 0.2:
                req.descriptor.package_version = "changed"
                note = "register again, changed"
            if r.random() < 0.1:
                owner = "o2" if owner != "o2" else "o1"
                note = "register again, other owner"
            return req, owner, note
        module = r.choice(self.modules)
        major = 1 if r.random() < 0.85 else 2
        rollout = "" if r.random() < 1 - self.rollout_share else r.choice(self.rollouts)
        if kind < 0.35 and self.known:
            # A replica of a known registration's generation.
            old, _ = self.known[r.choice(sorted(self.known))]
            module, major, rollout = (
                old.descriptor.module_id,
                old.descriptor.contract_major,
                old.rollout_id,
            )
        instance_id = r.choice(self.ids)
        req = pb.RegisterRequest(
            descriptor=self.design(module, major, rollout),
            instance_id=instance_id,
            lease_token=self.token(instance_id),
            rollout_id=rollout,
            rollout_modules=self.cohort(module, rollout) if rollout else [],
        )
        if r.random() < 0.3:
            req.context.trace_id = "trace"
        return req, self.owner(), f"register {module}/{major} {rollout or '-'}"

    def bad_register(self) -> tuple[pb.RegisterRequest, str, str]:
        req, owner, _ = self.valid_register()
        label, mutate = self.rng.choice(BAD_REGISTRATIONS)
        mutate(req, self.rng)
        if self.rng.random() < 0.15:
            # Two faults at once: the first check that fails names the error.
            second, mutate = self.rng.choice(BAD_REGISTRATIONS)
            mutate(req, self.rng)
            label = f"{label} + {second}"
        return req, owner, f"bad: {label}"

    # -- operations

    async def step(self) -> None:
        r, h = self.rng, self.h
        # Mostly short steps, so leases are often renewed in time; sometimes
        # one lands on or just past a lease end, or past every lease.
        if r.random() < 0.3:
            h.now += r.choice([0.125, 0.5, 1.0, 1.0, 2.5, 2.5, 5.0])
        elif r.random() < 0.03:
            h.now += r.choice([19.875, 20.0, 20.125, 30.0])
        elif r.random() < 0.01:
            # A clock stepping back (another replica, or NTP): records the
            # stored snapshot still holds can count as live again.
            h.now -= r.choice([0.125, 5.0, 25.0])
        pick = r.random()
        if pick < 0.30:
            if r.random() < self.bad_share:
                req, owner, note = self.bad_register()
            else:
                req, owner, note = self.valid_register()
            result = await h.call("register", req, owner, note)
            if result["ok"]:
                self.known[req.instance_id] = (req, owner)
                self.gone.pop(req.instance_id, None)
                if r.random() < self.eager:
                    # Comes up at once, as the SDK's runner does: rollouts
                    # then complete and cut over within a sequence.
                    renew = pb.RenewRequest(
                        instance_id=req.instance_id, lease_token=req.lease_token, initialized=True
                    )
                    await h.call("renew", renew, owner, "up")
        elif pick < 0.55:
            req, owner = self.lease_request(pb.RenewRequest)
            req.initialized = r.random() < 0.7
            req.draining = r.random() < 0.08
            result = await h.call("renew", req, owner)
            if not result["ok"] and result["code"] == "LEASE_EXPIRED":
                self.forget(req.instance_id)
        elif pick < 0.60:
            req, owner = self.lease_request(pb.UnregisterRequest)
            if (await h.call("unregister", req, owner))["ok"]:
                self.forget(req.instance_id)
        elif pick < 0.65:
            instance_id = r.choice(
                self.ids + ["", "bad.id", "nope", "x" * 129] + sorted(self.known)
            )
            owner = r.choice(["api", "engine", "o1", "API", "", "ops"])
            if (await h.call("evict", pb.EvictRequest(instance_id=instance_id), owner))["ok"]:
                self.forget(instance_id)
        elif pick < 0.77:
            module = r.choice(self.modules * 4 + ["zz", "", "bad name"])
            major = r.choice([1] * 8 + [2, 2, 0, 3, 2**32 - 1])
            await h.call(
                "get_module", pb.GetModuleRequest(module_id=module, contract_major=major)
            )
        elif pick < 0.85:
            limit = r.choice([0, 1, 2, 3, 5, 50, 100, 101, 2**32 - 1])
            after = "" if r.random() < 0.6 else r.choice(self.ids + ["i", "i3x", "zzz", "é", "😀", "I"])
            if self.next_page and r.random() < 0.7:
                after = self.next_page  # walk on from the last page
            result = await h.call(
                "list_modules", pb.ListModulesRequest(limit=limit, after_instance_id=after)
            )
            if result["ok"]:
                page = pb.ListModulesResponse.FromString(bytes.fromhex(result["response"]))
                self.next_page = page.next_after_instance_id
        elif pick < 0.90:
            req, owner = self.lease_request(pb.AuthorizeAgentRequest)
            req.agent_name = r.choice(["chat", "chat", "other"])
            req.caller_token = "caller"
            req.new_invocation = r.random() < 0.6
            await h.call("authorize_agent", req, owner)
        elif pick < 0.95:
            req, owner = self.lease_request(pb.AuthorizeModelRequest)
            req.model_name = r.choice(["m", "m", "other"])
            await h.call("authorize_model", req, owner)
        else:
            req, owner = self.lease_request(pb.AuthorizeAppRequest)
            req.app_name = r.choice(["web", "web", "other"])
            await h.call("authorize_app", req, owner)

    def forget(self, instance_id: str) -> None:
        """The instance is gone: later requests name it less often."""
        if instance_id in self.known:
            self.gone[instance_id] = self.known.pop(instance_id)

    def lease_request(self, kind: Any) -> tuple[Any, str]:
        """A request naming a known instance with its lease, mostly right."""
        r = self.rng
        pool = self.known if self.known and r.random() < 0.9 else self.gone
        if pool and r.random() < 0.95:
            instance_id = r.choice(sorted(pool))
            old, owner = pool[instance_id]
            token = old.lease_token
        else:
            instance_id, owner = r.choice(self.ids), self.owner()
            token = self.token(instance_id)
        if r.random() < 0.05:
            token = token[:-1] + "!"
        if r.random() < 0.05:
            owner = "o2" if owner != "o2" else "o1"
        return kind(instance_id=instance_id, lease_token=token), owner


def _set(path: str, value: Any) -> Callable[[pb.RegisterRequest, random.Random], None]:
    """A mutation setting one field, given as a dotted path from the request."""

    def mutate(req: pb.RegisterRequest, _: random.Random) -> None:
        *parents, last = path.split(".")
        target: Any = req
        for part in parents:
            target = getattr(target, part)
        setattr(target, last, value)

    return mutate


def _add(field: str, build: Callable[[int], Message], count: int = 1):
    def mutate(req: pb.RegisterRequest, _: random.Random) -> None:
        items = getattr(req.descriptor, field)
        for n in range(count):
            items.append(build(n))

    return mutate


def _job(**fields: Any) -> pb.JobDescriptor:
    base = dict(name="job", contract_major=1, max_concurrency=1, max_attempts=1)
    base.update(fields)
    triggers = base.pop("triggers", [])
    job = pb.JobDescriptor(**base)
    job.triggers.extend(triggers)
    return job


def _trigger(**fields: Any) -> pb.JobTrigger:
    base = dict(kind="every", spec="1h")
    base.update(fields)
    return pb.JobTrigger(**base)


def _app(**fields: Any) -> pb.AppDescriptor:
    base = dict(name="web", contract_major=1)
    base.update(fields)
    return pb.AppDescriptor(**base)


def _agent(**fields: Any) -> pb.AgentDescriptor:
    base = dict(name="ag", contract_major=1)
    base.update(fields)
    return pb.AgentDescriptor(**base)


def _replace(field: str, build: Callable[[], Message]):
    """Replace the descriptor's repeated ``field`` with one item."""

    def mutate(req: pb.RegisterRequest, _: random.Random) -> None:
        items = getattr(req.descriptor, field)
        del items[:]
        items.append(build())

    return mutate


def _rollout_modules(modules: list[str], rollout: str | None = "r9"):
    def mutate(req: pb.RegisterRequest, _: random.Random) -> None:
        if rollout is not None:
            req.rollout_id = rollout
        del req.rollout_modules[:]
        req.rollout_modules.extend(
            req.descriptor.module_id if m == "$self" else m for m in modules
        )

    return mutate


def _json_field(target: str, value: str):
    """Put ``value`` in a job's schema or trigger input."""

    def mutate(req: pb.RegisterRequest, _: random.Random) -> None:
        del req.descriptor.jobs[:]
        if target == "trigger":
            req.descriptor.jobs.append(_job(triggers=[_trigger(input=value)]))
        else:
            req.descriptor.jobs.append(_job(**{target: value}))

    return mutate


def _bad_registrations() -> list[tuple[str, Callable[[pb.RegisterRequest, random.Random], None]]]:
    cases: list[tuple[str, Callable[[pb.RegisterRequest, random.Random], None]]] = []
    for name in ["", "-a", ".a", "a b", "a/b", "é", "a*", "x" * 257, "a" * 256, "a.b:c-d", "_x", "a\n", "\u0661", "ａ", "a\x00"]:
        cases.append((f"module_id {name[:12]!r}", _set("descriptor.module_id", name)))
    for iid in ["", "a.b", "x" * 129, "y" * 128, "a*", "é", "a b", "-lead", "a>", "a\n", "\u0661"]:
        cases.append((f"instance_id {iid[:12]!r}", _set("instance_id", iid)))
    for rid in ["-r", "r" * 129, "s" * 128, "r:1.x", "r/1", "é"]:
        cases.append((f"rollout_id {rid[:12]!r}", _set("rollout_id", rid)))
    cases += [
        ("cohort without rollout", _rollout_modules(["$self"], rollout="")),
        ("cohort duplicate", _rollout_modules(["$self", "$self"])),
        ("cohort without self", _rollout_modules(["zz"])),
        ("cohort bad name", _rollout_modules(["$self", "b c"])),
        ("cohort 64", _rollout_modules(["$self"] + [f"m{n}" for n in range(63)])),
        ("cohort 65", _rollout_modules(["$self"] + [f"m{n}" for n in range(64)])),
    ]
    for token in ["", "t" * 31, "t" * 32, "t" * 256, "t" * 257, "é" * 32, "é" * 31 + "t", "😀" * 20, "😀" * 40, "😀" * 257]:
        cases.append((f"lease_token len {len(token)}", _set("lease_token", token)))
    cases += [
        ("no descriptor", lambda req, _: req.ClearField("descriptor")),
        ("contract 0", _set("descriptor.contract_major", 0)),
        ("contract u32 max", _set("descriptor.contract_major", 2**32 - 1)),
        ("package_version 128", _set("descriptor.package_version", "v" * 128)),
        ("package_version 129", _set("descriptor.package_version", "v" * 129)),
        ("package_version 128 unicode", _set("descriptor.package_version", "é" * 128)),
        ("deps 64", _add("dependencies", lambda n: pb.Dependency(module_id=f"dep{n}", contract_major=1), 64)),
        ("deps 65", _add("dependencies", lambda n: pb.Dependency(module_id=f"dep{n}", contract_major=1), 65)),
        ("deps duplicate", _add("dependencies", lambda n: pb.Dependency(module_id="zz", contract_major=1), 2)),
        ("deps same id two majors", _add("dependencies", lambda n: pb.Dependency(module_id="zz", contract_major=n + 1), 2)),
        ("dep bad name", _add("dependencies", lambda n: pb.Dependency(module_id="a b", contract_major=1))),
        ("dep major 0", _add("dependencies", lambda n: pb.Dependency(module_id="zz", contract_major=0))),
        ("dep on itself", lambda req, _: req.descriptor.dependencies.add(module_id=req.descriptor.module_id, contract_major=req.descriptor.contract_major)),
        ("agents 128", _add("agents", lambda n: _agent(name=f"ag{n}"), 128)),
        ("agents 129", _add("agents", lambda n: _agent(name=f"ag{n}"), 129)),
        ("agents duplicate", _add("agents", lambda n: _agent(name="dup"), 2)),
        ("agent bad name", _add("agents", lambda n: _agent(name="a b"))),
        ("agent major 0", _add("agents", lambda n: _agent(contract_major=0))),
        ("agent description 4096", _add("agents", lambda n: _agent(description="d" * 4096))),
        ("agent description 4097", _add("agents", lambda n: _agent(description="d" * 4097))),
        ("agent description 4096 unicode", _add("agents", lambda n: _agent(description="😀" * 4096))),
        ("agent caps 32", _add("agents", lambda n: _agent(capabilities=[f"c{k}" for k in range(32)]))),
        ("agent caps 33", _add("agents", lambda n: _agent(capabilities=[f"c{k}" for k in range(33)]))),
        ("agent cap bad", _add("agents", lambda n: _agent(capabilities=["ok", "not ok"]))),
        ("agent cap duplicate", _add("agents", lambda n: _agent(capabilities=["c", "c"]))),
        ("jobs 128", _add("jobs", lambda n: _job(name=f"j{n}"), 128)),
        ("jobs 129", _add("jobs", lambda n: _job(name=f"j{n}"), 129)),
        ("jobs duplicate", _add("jobs", lambda n: _job(name="j"), 2)),
        ("job bad name", _replace("jobs", lambda: _job(name="bad name"))),
        ("job major 0", _replace("jobs", lambda: _job(contract_major=0))),
        ("job description 4097", _replace("jobs", lambda: _job(description="d" * 4097))),
        ("job concurrency 0", _replace("jobs", lambda: _job(max_concurrency=0))),
        ("job concurrency 64", _replace("jobs", lambda: _job(max_concurrency=64))),
        ("job concurrency 65", _replace("jobs", lambda: _job(max_concurrency=65))),
        ("job attempts 0", _replace("jobs", lambda: _job(max_attempts=0))),
        ("job attempts 100", _replace("jobs", lambda: _job(max_attempts=100))),
        ("job attempts 101", _replace("jobs", lambda: _job(max_attempts=101))),
        ("job timeout negative", _replace("jobs", lambda: _job(timeout_seconds=-0.5))),
        ("job timeout tiny negative", _replace("jobs", lambda: _job(timeout_seconds=-5e-324))),
        ("job timeout huge", _replace("jobs", lambda: _job(timeout_seconds=1.7976931348623157e308))),
        ("job timeout nan", _replace("jobs", lambda: _job(timeout_seconds=math.nan))),
        ("job timeout inf", _replace("jobs", lambda: _job(timeout_seconds=math.inf))),
        ("job timeout -inf", _replace("jobs", lambda: _job(timeout_seconds=-math.inf))),
        ("job kind task", _replace("jobs", lambda: _job(kind="task"))),
        ("job kind Job", _replace("jobs", lambda: _job(kind="Job"))),
        ("job triggers 16", _replace("jobs", lambda: _job(triggers=[_trigger() for _ in range(16)]))),
        ("job triggers 17", _replace("jobs", lambda: _job(triggers=[_trigger() for _ in range(17)]))),
        ("trigger kind", _replace("jobs", lambda: _job(triggers=[_trigger(kind="hourly")]))),
        ("trigger cron", _replace("jobs", lambda: _job(triggers=[_trigger(kind="cron", spec="not checked here", time_zone="Mars/Base")]))),
        ("trigger event", _replace("jobs", lambda: _job(triggers=[_trigger(kind="event", spec="a.b", filter="not json either")]))),
        ("trigger spec empty", _replace("jobs", lambda: _job(triggers=[_trigger(spec="")]))),
        ("trigger spec 256", _replace("jobs", lambda: _job(triggers=[_trigger(spec="s" * 256)]))),
        ("trigger spec 257", _replace("jobs", lambda: _job(triggers=[_trigger(spec="s" * 257)]))),
        ("trigger spec 256 unicode", _replace("jobs", lambda: _job(triggers=[_trigger(spec="é" * 256)]))),
        ("trigger zone 64", _replace("jobs", lambda: _job(triggers=[_trigger(time_zone="z" * 64)]))),
        ("trigger zone 65", _replace("jobs", lambda: _job(triggers=[_trigger(time_zone="z" * 65)]))),
        ("trigger input 4096", _json_field("trigger", '{"p": "' + "x" * 4088 + '"}')),
        ("trigger input 4097", _json_field("trigger", '{"p": "' + "x" * 4089 + '"}')),
        ("trigger input 4096 bytes unicode", _json_field("trigger", '{"p": "' + "é" * 2044 + '"}')),
        ("trigger input 4097 bytes unicode", _json_field("trigger", '{"p": "' + "é" * 2044 + 'x"}')),
        ("schema 16384", _json_field("input_schema", '{"p": "' + "x" * (16384 - 9) + '"}')),
        ("schema 16385", _json_field("output_schema", '{"p": "' + "x" * (16385 - 9) + '"}')),
        ("job bytes over 64 KiB", _replace("jobs", lambda: _job(
            input_schema='{"p": "' + "x" * 16000 + '"}',
            output_schema='{"p": "' + "x" * 16000 + '"}',
            description="d" * 4096,
            triggers=[_trigger(input='{"p": "' + "x" * 4000 + '"}') for _ in range(8)],
        ))),
        ("job bytes under 64 KiB", _replace("jobs", lambda: _job(
            input_schema='{"p": "' + "x" * 16000 + '"}',
            output_schema='{"p": "' + "x" * 16000 + '"}',
            triggers=[_trigger(input='{"p": "' + "x" * 4000 + '"}') for _ in range(6)],
        ))),
        ("models 128", _add("models", lambda n: pb.ModelDescriptor(name=f"m{n}", kind="chat"), 128)),
        ("models 129", _add("models", lambda n: pb.ModelDescriptor(name=f"m{n}", kind="chat"), 129)),
        ("models duplicate", _add("models", lambda n: pb.ModelDescriptor(name="dup", kind="chat"), 2)),
        ("model bad name", _add("models", lambda n: pb.ModelDescriptor(name="", kind="chat"))),
        ("model kind", _add("models", lambda n: pb.ModelDescriptor(name="x", kind="embedding"))),
        ("model description 4097", _add("models", lambda n: pb.ModelDescriptor(name="x", kind="chat", description="d" * 4097))),
        ("apps 16", _add("apps", lambda n: _app(name=f"app{n}"), 16)),
        ("apps 17", _add("apps", lambda n: _app(name=f"app{n}"), 17)),
        ("apps duplicate", _add("apps", lambda n: _app(name="dup"), 2)),
        ("app name dot", _add("apps", lambda n: _app(name="a.b"))),
        ("app name 64", _add("apps", lambda n: _app(name="a" * 64))),
        ("app name 65", _add("apps", lambda n: _app(name="a" * 65))),
        ("app major 0", _add("apps", lambda n: _app(contract_major=0))),
        ("app title 257", _add("apps", lambda n: _app(title="t" * 257))),
        ("app category 65", _add("apps", lambda n: _app(category="c" * 65))),
        ("app emoji 16", _add("apps", lambda n: _app(icon_emoji="👩‍💻" * 5 + "x"))),
        ("app emoji 17", _add("apps", lambda n: _app(icon_emoji="👩‍💻" * 5 + "xy"))),
        ("app description 4097", _add("apps", lambda n: _app(description="d" * 4097))),
        ("app title 256 unicode", _add("apps", lambda n: _app(title="é" * 256))),
        ("app description 4096 unicode", _add("apps", lambda n: _app(description="é" * 4096))),
        ("app bytes over 4096", _add("apps", lambda n: _app(title="t" * 256, description="d" * 4000))),
        ("app bytes at 4096 unicode", _add("apps", lambda n: _app(description="é" * 2030))),
        ("app upload max", _add("apps", lambda n: _app(max_upload_bytes=2**64 - 1))),
    ]
    for entry in ["/x", "a/../b", "..", "a/..", "a\\b", "e" * 256, "e" * 257, "a/..b", "./a", "a//b", "é" * 256]:
        cases.append((f"app entry {entry[:12]!r}", _add("apps", lambda n, e=entry: _app(entry=e))))
    for n, value in enumerate(VALID_JSON_VALUES + INVALID_JSON_VALUES):
        target = ["input_schema", "output_schema", "trigger"][n % 3]
        cases.append((f"json {target} {value[:20]!r}", _json_field(target, value)))
    for value in LONG_JSON_VALUES:
        cases.append((f"json long {value[:12]!r} ({len(value)})", _json_field("input_schema", value)))
    return cases


BAD_REGISTRATIONS = _bad_registrations()


async def random_sequence(seed: int, index: int, out: list[str]) -> Harness:
    rng = random.Random(f"{seed}:{index}")
    start = rng.choice([0.0, 1000.5, 1764400000.25])
    # Mostly the default lease; sometimes the shortest allowed, or one whose
    # sums with the clock are not exact.
    lease = rng.choice([LEASE_SECONDS] * 6 + [1.0, 7.3, 86400.5])
    admins = rng.choice([ADMINS] * 8 + [("ops",), ()])
    h = Harness(f"{seed}:{index}", start, out, lease, admins)
    gen = Generator(rng, h)
    # Filling the registry is slow in the reference (each operation walks
    # every record): a fixed few sequences do it, so that every run of 250
    # sequences meets both bounds.
    if index % 250 == 7:
        await fill(gen, "count")
    elif index % 250 == 131:
        await fill(gen, "bytes")
    for _ in range(rng.randint(20, 60)):
        await gen.step()
    await h.call("view", pb.RegistryState())
    h.finish()
    return h


async def fill(gen: Generator, how: str) -> None:
    """Register until the registry is full: by instance count or by bytes."""
    h, r = gen.h, gen.rng
    big = '{"p": "' + "x" * 15000 + '"}'
    total = 262 if how == "count" else 22
    for n in range(total):
        module = f"f{n % 7}"
        d = pb.ModuleDescriptor(module_id=module, contract_major=1)
        if how == "bytes":
            d.jobs.append(_job(input_schema=big, output_schema=big))
        iid = f"f{n:03d}"
        req = pb.RegisterRequest(descriptor=d, instance_id=iid, lease_token=iid * 11)
        result = await h.call("register", req, "o1", f"fill {how}")
        if result["ok"]:
            gen.known[iid] = (req, "o1")
        if r.random() < 0.1:
            await h.call("renew", pb.RenewRequest(instance_id=iid, lease_token=iid * 11, initialized=True), "o1")


# ------------------------------------------------------------ fixed scenarios


def reg(module: str, iid: str, deps: tuple[str, ...] = (), rollout: str = "", major: int = 1, cohort: tuple[str, ...] = ()) -> pb.RegisterRequest:
    return pb.RegisterRequest(
        descriptor=pb.ModuleDescriptor(
            module_id=module,
            contract_major=major,
            dependencies=[pb.Dependency(module_id=d, contract_major=1) for d in deps],
        ),
        instance_id=iid,
        lease_token="lease-token-" + iid.ljust(24, "."),
        rollout_id=rollout,
        rollout_modules=cohort,
    )


class Script:
    """A hand-written sequence; each step states the code it expects."""

    def __init__(self, name: str, out: list[str], now: float = 0.0) -> None:
        self.h = Harness(f"fixed:{name}", now, out)

    async def do(self, op: str, req: Message, owner: str = "o", want: str = "OK") -> Expect:
        result = await self.h.call(op, req, owner, note=f"want {want}")
        got = "OK" if result["ok"] else result["code"]
        if got != want:
            raise AssertionError(f"{self.h.seq} step {self.h.index - 1}: reference gave {got}, scenario wants {want}: {result}")
        return result

    async def up(self, req: pb.RegisterRequest, owner: str = "o") -> None:
        await self.do("register", req, owner)
        await self.renew(req, owner)

    async def renew(self, req: pb.RegisterRequest, owner: str = "o", want: str = "OK", draining: bool = False) -> None:
        await self.do(
            "renew",
            pb.RenewRequest(instance_id=req.instance_id, lease_token=req.lease_token, initialized=True, draining=draining),
            owner,
            want,
        )

    async def statuses(self, module: str, want: dict[str, str], major: int = 1) -> None:
        result = await self.do("get_module", pb.GetModuleRequest(module_id=module, contract_major=major))
        got = {i.instance_id: i.status for i in pb.GetModuleResponse.FromString(bytes.fromhex(result["response"])).instances}
        if got != want:
            raise AssertionError(f"{self.h.seq}: statuses of {module}: {got}, scenario wants {want}")


async def fixed_scenarios(out: list[str]) -> None:
    # Readiness follows dependencies, is lost with them and comes back.
    s = Script("readiness", out)
    a, b = reg("a", "a1", ("b",)), reg("b", "b1")
    await s.up(a)
    await s.statuses("a", {"a1": "DEGRADED"})
    await s.up(b)
    await s.statuses("a", {"a1": "READY"})
    s.h.now = 15
    await s.renew(a)
    s.h.now = 20.125  # b1 expired (registered and renewed at 0)
    await s.statuses("a", {"a1": "DEGRADED"})
    await s.do("get_module", pb.GetModuleRequest(module_id="b", contract_major=1), want="MODULE_NOT_FOUND")
    await s.renew(b, want="LEASE_EXPIRED")
    await s.up(reg("b", "b1"))
    await s.renew(a)
    await s.statuses("a", {"a1": "READY"})
    await s.do("get_module", pb.GetModuleRequest(module_id="a", contract_major=2), want="INCOMPATIBLE_MODULE")
    s.h.finish()

    # The lease boundary: a record lives while expires_at > now.
    s = Script("lease-boundary", out, now=1764400000.25)
    x = reg("x", "x1")
    await s.do("register", x)
    s.h.now += 19.875
    await s.do("register", x)  # idempotent: keeps expires_at, lease_seconds shrinks
    s.h.now += 0.125  # now == expires_at: expired
    await s.renew(x, want="LEASE_EXPIRED")
    await s.do("register", x)
    await s.do("unregister", pb.UnregisterRequest(instance_id="x1", lease_token=x.lease_token), owner="other", want="PERMISSION_DENIED")
    await s.do("unregister", pb.UnregisterRequest(instance_id="x1", lease_token="wrong" * 8), want="PERMISSION_DENIED")
    await s.do("unregister", pb.UnregisterRequest(instance_id="x1", lease_token=x.lease_token))
    await s.do("unregister", pb.UnregisterRequest(instance_id="x1", lease_token=x.lease_token))
    s.h.finish()

    # A rollout waits for its cohort, then drains the previous generation.
    s = Script("rollout-cutover", out)
    await s.up(reg("a", "a-old"))
    await s.up(reg("b", "b-old"))
    s.h.now = 10
    new_a = reg("a", "a-new", rollout="release-2", cohort=("a", "b"))
    await s.up(new_a)
    await s.statuses("a", {"a-old": "READY", "a-new": "STAGED"})
    await s.do("register", reg("a", "a-bad", rollout="release-2", cohort=("a",)), want="DESCRIPTOR_CONFLICT")
    await s.up(reg("b", "b-new", rollout="release-2", cohort=("b", "a")))
    await s.statuses("a", {"a-old": "DRAINING", "a-new": "READY"})
    await s.statuses("b", {"b-old": "DRAINING", "b-new": "READY"})
    await s.do("list_modules", pb.ListModulesRequest(limit=3))
    await s.do("list_modules", pb.ListModulesRequest(limit=3, after_instance_id="a-old"))
    await s.do("list_modules", pb.ListModulesRequest(limit=101), want="INVALID_ARGUMENT")
    s.h.finish()

    # A rollout may reverse an edge between modules it replaces, in either order.
    for order in (("b", "a"), ("a", "b")):
        s = Script("reverse-edge-" + "".join(order), out)
        await s.up(reg("a", "a-old", ("b",)))
        await s.up(reg("b", "b-old"))
        s.h.now = 10
        new = {
            "a": reg("a", "a-new", rollout="release-2", cohort=("a", "b")),
            "b": reg("b", "b-new", ("a",), rollout="release-2", cohort=("a", "b")),
        }
        for name in order:
            await s.up(new[name])
        await s.statuses("a", {"a-old": "DRAINING", "a-new": "READY"})
        await s.statuses("b", {"b-old": "DRAINING", "b-new": "READY"})
        s.h.finish()

    # Cycles within a generation, or with one that could serve beside it.
    s = Script("cycles", out)
    await s.up(reg("a", "a-old"))
    await s.up(reg("c", "c-old", ("a",)))
    await s.do("register", reg("a", "a-2", ("b",), rollout="release-2", cohort=("a", "b")))
    await s.do("register", reg("b", "b-2", ("a",), rollout="release-2", cohort=("a", "b")), want="DEPENDENCY_CYCLE")
    await s.do("register", reg("a", "a-3", ("c",), rollout="release-3"), want="DEPENDENCY_CYCLE")
    await s.do("register", reg("b", "b-4", ("a",), rollout="release-4"), want="DEPENDENCY_CYCLE")
    await s.do("register", reg("d", "d-1", ("a", "c"), rollout="release-5"))
    await s.do("register", reg("e", "e-1", ("e",)), want="DEPENDENCY_CYCLE")
    s.h.finish()

    # The serving generation keeps serving when its rollout breaks.
    s = Script("broken-rollout", out)
    cohort = ("a", "b")
    old_a = reg("a", "a-old", rollout="release-1", cohort=cohort)
    await s.up(old_a)
    await s.up(reg("b", "b-old", rollout="release-1", cohort=cohort))
    s.h.now = 10
    new_a = reg("a", "a-new", rollout="release-2", cohort=cohort)
    await s.up(new_a)
    s.h.now = 15
    await s.renew(old_a)
    s.h.now = 25
    await s.renew(new_a)
    await s.statuses("a", {"a-old": "READY", "a-new": "STAGED"})
    await s.up(reg("a", "a-old-2", rollout="release-1", cohort=cohort))
    await s.up(reg("b", "b-new", rollout="release-2", cohort=cohort))
    await s.statuses("a", {"a-old": "DRAINING", "a-old-2": "DRAINING", "a-new": "READY"})
    await s.renew(new_a, draining=True)
    await s.statuses("a", {"a-old": "DRAINING", "a-old-2": "DRAINING", "a-new": "DRAINING"})
    s.h.finish()

    # Eviction: admins only, a valid id, a live record.
    s = Script("evict", out)
    p = reg("p", "p1")
    await s.up(p)
    await s.do("evict", pb.EvictRequest(instance_id="p1"), owner="o", want="PERMISSION_DENIED")
    await s.do("evict", pb.EvictRequest(instance_id="p.1"), owner="api", want="INVALID_ARGUMENT")
    await s.do("evict", pb.EvictRequest(instance_id="nope"), owner="api", want="INSTANCE_NOT_FOUND")
    await s.do("evict", pb.EvictRequest(instance_id="p1"), owner="engine")
    await s.renew(p, want="LEASE_EXPIRED")
    await s.do("register", p)
    s.h.finish()

    # Authorizations need the lease, the name, and READY.
    s = Script("authorize", out)
    prov = reg("prov", "pr1")
    prov.descriptor.agents.add(name="Researcher", contract_major=1, capabilities=["agent.invoke.v1"])
    prov.descriptor.models.add(name="writer", kind="chat")
    prov.descriptor.apps.add(name="ui", contract_major=1)
    await s.do("register", prov)
    agent = pb.AuthorizeAgentRequest(instance_id="pr1", lease_token=prov.lease_token, agent_name="Researcher")
    await s.do("authorize_agent", agent)
    agent.new_invocation = True
    await s.do("authorize_agent", agent, want="MODULE_UNAVAILABLE")
    model = pb.AuthorizeModelRequest(instance_id="pr1", lease_token=prov.lease_token, model_name="writer")
    await s.do("authorize_model", model, want="MODULE_UNAVAILABLE")
    app = pb.AuthorizeAppRequest(instance_id="pr1", lease_token=prov.lease_token, app_name="ui")
    await s.do("authorize_app", app, want="MODULE_UNAVAILABLE")
    await s.renew(prov)
    await s.do("authorize_agent", agent)
    await s.do("authorize_model", model)
    await s.do("authorize_app", app)
    await s.do("authorize_agent", agent, owner="other", want="PERMISSION_DENIED")
    agent.agent_name = "Missing"
    await s.do("authorize_agent", agent, want="AGENT_NOT_FOUND")
    model.model_name = "missing"
    await s.do("authorize_model", model, want="MODEL_NOT_FOUND")
    app.app_name = "missing"
    await s.do("authorize_app", app, want="APP_NOT_FOUND")
    s.h.now = 20
    await s.do("authorize_app", app, want="LEASE_EXPIRED")
    s.h.finish()

    # 256 live instances at most; an expired one frees its place.
    s = Script("full-by-count", out)
    for n in range(256):
        await s.do("register", reg(f"m{n % 5}", f"n{n:03d}"))
        if n == 0:
            s.h.now = 1
    await s.do("register", reg("m0", "n256"), want="REGISTRY_FULL")
    await s.do("register", reg("m1", "n001"))  # already registered: no new place needed
    await s.do("list_modules", pb.ListModulesRequest(limit=100, after_instance_id="n100"))
    s.h.now = 20  # n000 (registered at 0) expired
    await s.do("register", reg("m0", "n256"))
    s.h.finish()

    # 512 KiB of snapshot at most, to the byte: a renew that grows a record by
    # two bytes (initialized, status DEGRADED) is refused at the limit.
    s = Script("full-by-bytes", out)
    big = '{"p": "' + "x" * 15000 + '"}'
    n = 0
    while s.h.snapshot().ByteSize() + 32000 <= 512 * 1024:
        d = pb.ModuleDescriptor(module_id="big", contract_major=1, dependencies=[pb.Dependency(module_id="absent", contract_major=1)])
        d.jobs.append(_job(input_schema=big, output_schema=big))
        await s.do("register", pb.RegisterRequest(descriptor=d, instance_id=f"big{n:02d}", lease_token="t" * 40))
        n += 1
    # Pad the last record so the snapshot ends exactly one byte under the limit
    # once it is registered (found on a scratch copy of the registry); its
    # initialized renewal then adds two bytes.
    target = 512 * 1024 - 1
    width = 0  # the smallest pad first, then step to the target size
    for _ in range(10):
        inner, outer = min(width, 16000), max(width - 16000, 0)
        last = pb.RegisterRequest(
            descriptor=pb.ModuleDescriptor(module_id="pad", contract_major=1, dependencies=[pb.Dependency(module_id="absent", contract_major=1)]),
            instance_id="pad",
            lease_token="t" * 40,
        )
        last.descriptor.jobs.append(
            _job(input_schema='{"p": "' + "x" * inner + '"}', output_schema='{"p": "' + "x" * outer + '"}')
        )
        shadow = MemoryRegistry()
        shadow.data = s.h.registry.data
        scratch = DiscoveryService(shadow, lease_seconds=LEASE_SECONDS, clock=lambda: s.h.now)
        try:
            await scratch.register(last, "o")
            size = len(shadow.data)
        except DiscoveryError:
            size = 512 * 1024 + 1
        if size == target:
            break
        width -= size - target
    await s.do("register", last)
    if len(s.h.registry.data) != target:
        raise AssertionError(f"full-by-bytes: snapshot is {len(s.h.registry.data)} bytes, wants {target}")
    await s.renew(last, want="REGISTRY_FULL")
    await s.do("register", reg("tiny", "tiny"), want="REGISTRY_FULL")
    await s.do("unregister", pb.UnregisterRequest(instance_id="big00", lease_token="t" * 40))
    await s.renew(last)
    s.h.finish()


async def difference_scenarios(out: list[str]) -> None:
    """One short sequence per DIFFERENCES entry the rules can show, each
    operation that differs marked with its entry (the test checks that these
    differ, and only in the way described)."""
    # -0.0: the same answer, but Python's bytes carry the field.
    h = Harness("differences:negative-zero", 0.0, out)
    req = reg("z", "z1")
    req.descriptor.jobs.append(_job(timeout_seconds=-0.0))
    zero = "negative-zero-timeout"
    await h.call("register", req, "o", difference=zero, bytes_only=True)
    get = pb.GetModuleRequest(module_id="z", contract_major=1)
    await h.call("get_module", get, difference=zero, bytes_only=True)
    h.finish(difference=zero, bytes_only=True)
    # ... and Python's message equality tells -0.0 from 0.0: a replica, or
    # the same registration, declaring 0.0 is a conflict there.
    h = Harness("differences:negative-zero-replica", 0.0, out)
    await h.call("register", req, "o", difference=zero, bytes_only=True)
    for iid in ("z1", "z2"):
        plain = reg("z", iid)
        plain.descriptor.jobs.append(_job(timeout_seconds=0.0))
        await h.call("register", plain, "o", difference=zero)
    h.finish(difference=zero)

    # Unknown fields: kept, stored and compared by Python only.
    h = Harness("differences:unknown-fields", 0.0, out)
    newer = reg("u", "u1")
    newer.descriptor.MergeFromString(bytes([0x98, 0x06, 0x01]))  # field 99 = 1
    await h.call("register", newer, "o", difference="unknown-fields", bytes_only=True)
    await h.call("register", reg("u", "u1"), "o", difference="unknown-fields")
    h.finish(difference="unknown-fields", bytes_only=True)

    # JSON nested near Python's recursion limit.
    h = Harness("differences:json-depth", 0.0, out)
    for depth in (995, 1001):
        deep = reg("j", f"j{depth}")
        deep.descriptor.jobs.append(_job(input_schema='{"a": ' + "[" * depth + "]" * depth + "}"))
        await h.call("register", deep, "o", difference="json-nesting-at-python-recursion-limit")
    h.finish(difference="json-nesting-at-python-recursion-limit")


async def main_async(args: argparse.Namespace) -> None:
    out: list[str] = []
    codes: dict[str, int] = {}

    def flush() -> None:
        sys.stdout.write("\n".join(out) + "\n" if out else "")
        out.clear()

    if args.fixed:
        await fixed_scenarios(out)
        flush()
        return
    if args.differences:
        await difference_scenarios(out)
        flush()
        return
    indices = [args.only] if args.only is not None else range(args.sequences)
    for index in indices:
        h = await random_sequence(args.seed, index, out)
        for code, count in h.codes.items():
            codes[code] = codes.get(code, 0) + count
        if len(out) > 2000:
            flush()
    flush()
    print(json.dumps(codes, sort_keys=True), file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description="Differential harness for the discovery rules.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sequences", type=int, default=100)
    parser.add_argument("--fixed", action="store_true")
    parser.add_argument("--differences", action="store_true", help="show each deliberate difference")
    parser.add_argument("--only", type=int, help="only sequence ONLY of the seed (to reproduce one)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
