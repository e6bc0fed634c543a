#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_proto::common::v1::CallContext;
use abi_proto::document::v1 as pb;
use pb::value::Kind;
use prost::Message as _;

use super::*;
use crate::pb::data_to_pb;

fn value(kind: Kind) -> pb::Value {
    pb::Value { kind: Some(kind) }
}

/// A body with every kind, nested lists and objects, odd keys.
fn body() -> pb::Data {
    let mut inner = Data::new();
    inner.insert("deep".into(), Value::List(vec![]));
    inner.insert(String::new(), Value::String(String::new()));
    let mut data = Data::new();
    for (key, v) in [
        ("null", Value::Null),
        ("t", Value::Bool(true)),
        ("f", Value::Bool(false)),
        ("zero", Value::Int(0)),
        ("neg", Value::Int(i64::MIN)),
        ("big", Value::Int(i64::MAX)),
        ("minus one", Value::Int(-1)),
        ("float", Value::Float(-0.0)),
        ("pi", Value::Float(3.25)),
        ("nan", Value::Float(f64::NAN)),
        ("text", Value::String("héllo \u{1F600}".repeat(3))),
        ("bytes", Value::Bytes(vec![0, 1, 255])),
        (
            "at",
            Value::Datetime(Datetime::from_unix_micros(1_700_000_000_000_123).unwrap()),
        ),
        (
            "list",
            Value::List(vec![
                Value::Int(-3),
                Value::Object(inner.clone()),
                Value::Null,
            ]),
        ),
        ("obj", Value::Object(inner)),
        ("é", Value::String("x".into())),
    ] {
        data.insert(key.into(), v);
    }
    data_to_pb(&data)
}

fn put(data: Option<pb::Data>, if_version: Option<i64>, context: bool) -> pb::PutRequest {
    pb::PutRequest {
        context: context.then(|| CallContext {
            trace_id: "t-1".into(),
            timeout_ms: 5000,
            principal_id: "p".into(),
            ..Default::default()
        }),
        namespace: "ns".into(),
        collection: "runs".into(),
        id: "r-1".into(),
        data,
        if_version,
    }
}

/// The long way's answer: prost, then the conversion.
fn long_way(bytes: &[u8]) -> Option<(pb::PutRequest, Data)> {
    let mut request = pb::PutRequest::decode(bytes).ok()?;
    let data = data_from_pb_owned(request.data.take().unwrap_or_default()).ok()?;
    Some((request, data))
}

/// Whenever the short way answers, it answers what the long way does.
fn check_agrees(bytes: &[u8]) -> bool {
    let Some(short) = read_put(bytes) else {
        return false;
    };
    let long = long_way(bytes)
        .unwrap_or_else(|| panic!("the short way read bytes the long way refuses: {bytes:?}"));
    assert!(short.request.data.is_none());
    // Debug, so a NaN compares with itself.
    assert_eq!(
        format!("{:?}", (short.request, short.body.unwrap())),
        format!("{long:?}"),
        "bytes {bytes:?}"
    );
    true
}

/// Usual requests: every one takes the short way and agrees.
fn usual() -> Vec<Vec<u8>> {
    let mut cases = Vec::new();
    for data in [None, Some(pb::Data::default()), Some(body())] {
        for if_version in [None, Some(0), Some(7), Some(-1), Some(i64::MAX)] {
            for context in [false, true] {
                cases.push(put(data.clone(), if_version, context).encode_to_vec());
            }
        }
    }
    cases
}

#[test]
fn usual_requests_take_the_short_way_and_agree() {
    for bytes in usual() {
        assert!(check_agrees(&bytes), "left to prost: {bytes:?}");
    }
    let decoded = IncomingPut::decode(&put(Some(body()), Some(3), true).encode_to_vec()).unwrap();
    assert!(decoded.body.is_some() && decoded.request.data.is_none());
}

/// Every prefix, every byte changed, every pair of requests run together
/// (protobuf's merge) and unknown fields: the short way either agrees or
/// leaves the bytes to prost.
#[test]
fn damaged_and_merged_requests_agree_or_go_the_long_way() {
    let cases = usual();
    let (mut short, mut long) = (0, 0);
    let mut tally = |bytes: &[u8]| {
        if check_agrees(bytes) {
            short += 1;
        } else {
            long += 1;
        }
    };
    let sample = put(Some(body()), Some(2), true).encode_to_vec();
    for end in 0..sample.len() {
        tally(&sample[..end]);
    }
    for at in 0..sample.len() {
        for replace in [0x00, 0x01, 0x08, 0x0a, 0x12, 0x7f, 0x80, 0xff] {
            let mut bytes = sample.clone();
            bytes[at] = replace;
            tally(&bytes);
        }
    }
    for a in cases.iter().step_by(5) {
        for b in cases.iter().step_by(3) {
            tally(&[a.as_slice(), b.as_slice()].concat());
        }
    }
    // Unknown fields of each wire type, at the top and inside a value.
    for unknown in [
        &[0x38, 0x01][..],
        &[0x42, 0x00],
        &[0x49, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        tally(&[sample.as_slice(), unknown].concat());
    }
    // Both ways see some of these.
    assert!(short > 100 && long > 100, "short {short}, long {long}");
}

#[test]
fn odd_bodies_go_the_long_way_with_the_long_ways_answer() {
    let entry = |key: &str, v: Option<pb::Value>| {
        let mut data = pb::Data::default();
        data.fields.insert(key.into(), v.unwrap_or_default());
        data
    };
    // A value without a kind, a bad datetime, a kind sent twice.
    let no_kind = put(Some(entry("a", None)), None, false).encode_to_vec();
    let bad_time = put(
        Some(entry(
            "a",
            Some(value(Kind::DatetimeValue("yesterday".into()))),
        )),
        None,
        false,
    )
    .encode_to_vec();
    for bytes in [&no_kind, &bad_time] {
        assert!(read_put(bytes).is_none());
        let mut decoded = IncomingPut::decode(bytes).unwrap();
        assert!(decoded.body.is_none());
        assert!(decoded.take_body().is_err());
    }
    // Two kinds in one value: prost keeps the last.
    let one = value(Kind::IntValue(1)).encode_to_vec();
    let two = value(Kind::StringValue("two".into())).encode_to_vec();
    let mut entry_bytes = vec![0x0a, 1, b'k', 0x12];
    entry_bytes.push(u8::try_from(one.len() + two.len()).unwrap());
    entry_bytes.extend([one, two].concat());
    let mut data = vec![0x0a, u8::try_from(entry_bytes.len()).unwrap()];
    data.extend(entry_bytes);
    let mut bytes = vec![0x2a, u8::try_from(data.len()).unwrap()];
    bytes.extend(data);
    assert!(read_put(&bytes).is_none());
    let mut decoded = IncomingPut::decode(&bytes).unwrap();
    assert_eq!(
        decoded.take_body().unwrap().get("k"),
        Some(&Value::String("two".into()))
    );
}

#[test]
fn deep_bodies_past_the_limit_go_the_long_way() {
    let mut v = value(Kind::IntValue(1));
    for _ in 0..20 {
        v = value(Kind::ListValue(pb::Values { items: vec![v] }));
    }
    let bytes = put(
        Some({
            let mut data = pb::Data::default();
            data.fields.insert("deep".into(), v);
            data
        }),
        None,
        false,
    )
    .encode_to_vec();
    assert!(read_put(&bytes).is_none());
    assert!(IncomingPut::decode(&bytes).unwrap().take_body().is_ok());
}

#[test]
fn put_many_reads_each_put_and_keeps_its_context() {
    let puts: Vec<pb::PutRequest> = (0..3).map(|i| put(Some(body()), Some(i), i == 1)).collect();
    let many = pb::PutManyRequest {
        context: Some(CallContext {
            trace_id: "many".into(),
            ..Default::default()
        }),
        puts: puts.clone(),
    };
    let decoded = IncomingPutMany::decode(&many.encode_to_vec()).unwrap();
    assert_eq!(decoded.request.context, many.context);
    assert!(decoded.request.puts.is_empty());
    assert_eq!(decoded.puts.len(), 3);
    for (mut got, sent) in decoded.puts.into_iter().zip(puts) {
        assert!(got.body.is_some());
        let body = got.take_body().unwrap();
        assert_eq!(
            format!("{body:?}"),
            format!(
                "{:?}",
                data_from_pb_owned(sent.data.clone().unwrap()).unwrap()
            )
        );
        assert_eq!(got.request, pb::PutRequest { data: None, ..sent });
    }
    // One odd put sends the whole request the long way, with its answer.
    let mut odd = many.clone();
    odd.puts[1].data = Some({
        let mut data = pb::Data::default();
        data.fields.insert("a".into(), pb::Value::default());
        data
    });
    let decoded = IncomingPutMany::decode(&odd.encode_to_vec()).unwrap();
    assert!(decoded.puts.iter().all(|p| p.body.is_none()));
    assert_eq!(decoded.puts.len(), 3);
    assert!(IncomingPutMany::decode(&[0x12, 0x05, 0x01]).is_err());
}

#[test]
fn entries_out_of_order_or_repeated_keep_the_last_value_as_prost_does() {
    let one = |key: &str, n: i64| {
        let mut data = pb::Data::default();
        data.fields.insert(key.into(), value(Kind::IntValue(n)));
        data.encode_to_vec()
    };
    for order in [
        vec![one("b", 1), one("a", 2), one("b", 3)],
        vec![one("a", 1), one("a", 2)],
        vec![one("a", 1), one("c", 2), one("b", 3)],
    ] {
        let data = order.concat();
        let mut bytes = vec![0x2a, u8::try_from(data.len()).unwrap()];
        bytes.extend(data);
        assert!(check_agrees(&bytes), "left to prost: {bytes:?}");
    }
}
