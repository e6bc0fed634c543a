"""Writes the golden wire vectors of abi.document.v1: one serialized message per file.

The bytes come from the reference's own generated classes (naas_abi_proto 0.2.0),
and the document values from its own encoder (naas_abi_proto.document.values),
so they are what a Python peer puts on the wire. crates/abi-proto/tests/it/
golden_document.rs builds the same values in Rust and checks every file decodes
to them and re-encodes to the same bytes.

Usage: python make_document_vectors.py [--out DIR]   (default: ./document_vectors)

Every message appears as `<message>_empty` and `<message>_full`; the Value
oneof has one vector per variant and its limits (sint64 extremes, doubles,
unicode, nested lists and objects, datetimes as the reference encodes them).
Maps are written deterministically (sorted keys), as prost writes a BTreeMap
(no key is a prefix of another: upb then puts the longer key first).
"""

from __future__ import annotations

import argparse
import pathlib
import re
from datetime import datetime, timedelta, timezone

from naas_abi_proto.common.v1 import common_pb2 as common
from naas_abi_proto.document.v1 import document_pb2 as pb
from naas_abi_proto.document.values import encode_data, encode_value

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
WHEN = datetime(2026, 10, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))


def context() -> common.CallContext:
    return common.CallContext(trace_id="trace-doc", timeout_ms=2500, principal_id="user:bob")


def call_error() -> common.CallError:
    return common.CallError(code="VERSION_CONFLICT", message="VERSION_CONFLICT", retryable=False)


def data() -> pb.Data:
    return encode_data(
        {
            "status": "RUNNING",
            "attempt": 2,
            "ratio": 0.25,
            "ok": True,
            "none": None,
            "raw": b"\x00\xff",
            "when": WHEN,
            "logs": ["a", "b"],
            "trigger": {"kind": "manual", "n": -1},
        }
    )


def spec() -> pb.CollectionSpec:
    return pb.CollectionSpec(
        name="job_runs_ed954e41fa3f395c",
        fields=[
            pb.FieldSpec(name="job", type="string", indexed=True),
            pb.FieldSpec(name="run_id", type="string", unique=True),
            pb.FieldSpec(name="finished_at", type="string", indexed=True, unique=True),
        ],
        unique_together=[pb.UniqueGroup(fields=["job", "sequence"])],
    )


def document() -> pb.Document:
    return pb.Document(
        id="ingest:42",
        data=data(),
        created_at="2026-10-01T10:00:00.123456+00:00",
        updated_at="2026-10-01T10:00:01+00:00",
        version=3,
    )


def predicates() -> list[pb.Predicate]:
    return [
        pb.Predicate(field="status", operator="in", value=encode_value(["RUNNING", "RETRYING"])),
        pb.Predicate(field="attempt", operator="gte", value=encode_value(2)),
    ]


def vectors() -> dict[str, object]:
    v: dict[str, object] = {}
    # Values: every variant of the oneof, as the reference's encoder writes it.
    v["value_empty"] = pb.Value()
    v["value_full"] = encode_value({"nested": [1, "x", None]})
    v["value_null"] = encode_value(None)
    v["value_string_unicode"] = encode_value("é 📄 文档")
    v["value_int_min"] = encode_value(I64_MIN)
    v["value_int_max"] = encode_value(I64_MAX)
    v["value_int_minus_one"] = encode_value(-1)
    v["value_float_fraction"] = encode_value(0.1)
    v["value_float_large"] = encode_value(1e308)
    v["value_float_negative"] = encode_value(-2.5)
    v["value_bool_false"] = encode_value(False)
    v["value_bytes"] = encode_value(b"\x00\x01\xfe\xff")
    v["value_datetime"] = encode_value(WHEN)
    v["value_list"] = encode_value([1, [2, [3]], {"k": "v"}])
    v["values_empty"] = pb.Values()
    v["values_full"] = pb.Values(items=[encode_value(1), encode_value("two")])
    v["data_empty"] = pb.Data()
    v["data_full"] = data()
    v["field_spec_empty"] = pb.FieldSpec()
    v["field_spec_full"] = pb.FieldSpec(name="job", type="string", indexed=True, unique=True)
    v["unique_group_empty"] = pb.UniqueGroup()
    v["unique_group_full"] = pb.UniqueGroup(fields=["job", "sequence"])
    v["collection_spec_empty"] = pb.CollectionSpec()
    v["collection_spec_full"] = spec()
    v["document_empty"] = pb.Document()
    v["document_full"] = document()
    v["predicate_empty"] = pb.Predicate()
    v["predicate_full"] = predicates()[0]
    v["order_by_empty"] = pb.OrderBy()
    v["order_by_full"] = pb.OrderBy(field="finished_at", direction="desc")
    # Requests and replies.
    ns, coll = "acme.billing", "job_runs_ed954e41fa3f395c"
    v["ensure_collection_request_empty"] = pb.EnsureCollectionRequest()
    v["ensure_collection_request_full"] = pb.EnsureCollectionRequest(context=context(), namespace=ns, spec=spec())
    v["ensure_collection_response_empty"] = pb.EnsureCollectionResponse()
    v["ensure_collection_response_full"] = pb.EnsureCollectionResponse(error=call_error())
    v["drop_collection_request_empty"] = pb.DropCollectionRequest()
    v["drop_collection_request_full"] = pb.DropCollectionRequest(context=context(), namespace=ns, collection=coll)
    v["drop_collection_response_empty"] = pb.DropCollectionResponse()
    v["drop_collection_response_full"] = pb.DropCollectionResponse(error=call_error())
    v["collections_request_empty"] = pb.CollectionsRequest()
    v["collections_request_full"] = pb.CollectionsRequest(context=context(), namespace=ns)
    v["collections_response_empty"] = pb.CollectionsResponse()
    v["collections_response_full"] = pb.CollectionsResponse(error=call_error(), collections=["a", "b"])
    v["collection_spec_request_empty"] = pb.CollectionSpecRequest()
    v["collection_spec_request_full"] = pb.CollectionSpecRequest(context=context(), namespace=ns, collection=coll)
    v["collection_spec_response_empty"] = pb.CollectionSpecResponse()
    v["collection_spec_response_full"] = pb.CollectionSpecResponse(error=call_error(), spec=spec())
    v["namespaces_request_empty"] = pb.NamespacesRequest()
    v["namespaces_request_full"] = pb.NamespacesRequest(context=context())
    v["namespaces_response_empty"] = pb.NamespacesResponse()
    v["namespaces_response_full"] = pb.NamespacesResponse(error=call_error(), namespaces=["acme.billing", "naas_abi"])
    v["put_request_empty"] = pb.PutRequest()
    v["put_request_full"] = pb.PutRequest(context=context(), namespace=ns, collection=coll, id="ingest:42", data=data(), if_version=3)
    v["put_request_create_only"] = pb.PutRequest(namespace=ns, collection=coll, id="ingest:42", if_version=0)
    v["put_response_empty"] = pb.PutResponse()
    v["put_response_full"] = pb.PutResponse(error=call_error(), document=document())
    v["get_request_empty"] = pb.GetRequest()
    v["get_request_full"] = pb.GetRequest(context=context(), namespace=ns, collection=coll, id="ingest:42")
    v["get_response_empty"] = pb.GetResponse()
    v["get_response_full"] = pb.GetResponse(error=call_error(), document=document())
    v["delete_request_empty"] = pb.DeleteRequest()
    v["delete_request_full"] = pb.DeleteRequest(context=context(), namespace=ns, collection=coll, id="ingest:42", if_version=7)
    v["delete_request_version_zero"] = pb.DeleteRequest(id="x", if_version=0)
    v["delete_response_empty"] = pb.DeleteResponse()
    v["delete_response_full"] = pb.DeleteResponse(error=call_error())
    v["find_request_empty"] = pb.FindRequest()
    v["find_request_full"] = pb.FindRequest(
        context=context(), namespace=ns, collection=coll, where=predicates(),
        order_by=pb.OrderBy(field="finished_at", direction="asc"), limit=20,
        cursor="eyJ2IjoxfQ==", max_bytes=131072,
    )
    v["find_request_zero_limit"] = pb.FindRequest(limit=0, max_bytes=0, cursor="")
    v["find_response_empty"] = pb.FindResponse()
    v["find_response_full"] = pb.FindResponse(error=call_error(), items=[document(), pb.Document(id="b", version=1)], cursor="next")
    v["find_response_empty_cursor"] = pb.FindResponse(cursor="")
    v["count_request_empty"] = pb.CountRequest()
    v["count_request_full"] = pb.CountRequest(context=context(), namespace=ns, collection=coll, where=predicates())
    v["count_response_empty"] = pb.CountResponse()
    v["count_response_full"] = pb.CountResponse(error=call_error(), count=I64_MAX)
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=pathlib.Path, default=pathlib.Path(__file__).parent / "document_vectors"
    )
    out = parser.parse_args().out
    made = vectors()
    for type_name, message_type in pb.DESCRIPTOR.message_types_by_name.items():
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
