//! `abictl docs ...`: the document service (`abi.svc.document.v1`):
//! namespaces, a namespace's collections and their declarations, one
//! document, a page of documents, a count; and, etcdctl style, `put` and
//! `delete` of one document with an optional version check (for operators:
//! the records belong to the modules that write them).

use abi_sdk::documents::{DocumentClient, FindQuery, OrderBy, Value, data_from_json};
use base64::Engine as _;
use serde_json::{Map, json};

use super::Ctx;
use crate::cli::DocsCommand;
use crate::connect;
use crate::output::{Table, print_json};

/// Runs one `docs` subcommand.
///
/// # Errors
///
/// The service refused (`COLLECTION_NOT_FOUND`, `DOCUMENT_NOT_FOUND`,
/// `PERMISSION_DENIED` for `namespaces` as a module, ...) or is unreachable.
///
/// # Cancel safety
///
/// Not cancel safe: a `put` or `delete` dropped after its request went out may be done with
/// nothing printed; the other subcommands only read.
pub async fn run(cx: Ctx<'_>, command: &DocsCommand) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let docs = |namespace: &str| -> anyhow::Result<DocumentClient> {
        client
            .documents(namespace)
            .ok_or_else(|| anyhow::anyhow!("the document service needs a NATS connection"))
    };
    match command {
        DocsCommand::Namespaces => {
            let namespaces = docs("-")?.namespaces().await?;
            if cx.global.json {
                print_json(&json!(namespaces));
            } else {
                namespaces.iter().for_each(|n| println!("{n}"));
            }
        }
        DocsCommand::Collections { namespace } => {
            let docs = docs(namespace)?;
            let names = docs.collections().await?;
            let mut specs = Vec::new();
            for name in &names {
                specs.push(docs.collection_spec(name).await?);
            }
            if cx.global.json {
                let out: Vec<_> = specs
                    .iter()
                    .map(|s| {
                        json!({
                            "name": s.name,
                            "fields": s.fields.iter().map(|f| json!({"name": f.name, "type": f.field_type, "indexed": f.indexed, "unique": f.unique})).collect::<Vec<_>>(),
                            "unique_together": s.unique_together,
                        })
                    })
                    .collect();
                print_json(&json!(out));
            } else {
                let mut table = Table::new(&["COLLECTION", "FIELDS", "UNIQUE TOGETHER"]);
                for spec in &specs {
                    let fields: Vec<String> = spec
                        .fields
                        .iter()
                        .map(|f| {
                            let mut flags = String::new();
                            if f.indexed {
                                flags.push_str(",indexed");
                            }
                            if f.unique {
                                flags.push_str(",unique");
                            }
                            format!("{}:{}{flags}", f.name, f.field_type)
                        })
                        .collect();
                    let groups: Vec<String> =
                        spec.unique_together.iter().map(|g| g.join("+")).collect();
                    table.row(vec![spec.name.clone(), fields.join(" "), groups.join(" ")]);
                }
                print!("{}", table.render(cx.style));
            }
        }
        DocsCommand::Get {
            namespace,
            collection,
            id,
        } => {
            let doc = docs(namespace)?.get(collection, id).await?;
            print_json(&document_json(&doc));
        }
        DocsCommand::Find {
            namespace,
            collection,
            limit,
            order_by,
            desc,
        } => {
            let query = FindQuery {
                limit: *limit,
                order_by: order_by.as_ref().map(|field| {
                    if *desc {
                        OrderBy::desc(field.clone())
                    } else {
                        OrderBy::asc(field.clone())
                    }
                }),
                ..Default::default()
            };
            let page = docs(namespace)?.find(collection, query).await?;
            if cx.global.json {
                let items: Vec<_> = page.items.iter().map(document_json).collect();
                print_json(&json!({"items": items, "more": page.cursor.is_some()}));
            } else {
                let mut table = Table::new(&["ID", "VERSION", "UPDATED", "DATA"]);
                for doc in &page.items {
                    let data = serde_json::to_string(&data_json(&doc.data))?;
                    let shown: String = data.chars().take(100).collect();
                    table.row(vec![
                        doc.id.clone(),
                        doc.version.to_string(),
                        doc.updated_at.to_string(),
                        shown,
                    ]);
                }
                print!("{}", table.render(cx.style));
                if page.cursor.is_some() {
                    println!("(more: raise --limit)");
                }
            }
        }
        DocsCommand::Put {
            namespace,
            collection,
            id,
            data,
            if_version,
        } => {
            let object = crate::checks::json_object("the data", data).await?;
            let doc = docs(namespace)?
                .put(collection, id, data_from_json(&object), *if_version)
                .await?;
            print_json(&document_json(&doc));
        }
        DocsCommand::Delete {
            namespace,
            collection,
            id,
            if_version,
        } => {
            docs(namespace)?.delete(collection, id, *if_version).await?;
            if cx.global.json {
                print_json(&json!({"deleted": id}));
            } else {
                println!("deleted {namespace}/{collection}/{id}");
            }
        }
        DocsCommand::Count {
            namespace,
            collection,
        } => {
            let count = docs(namespace)?.count(collection, Vec::new()).await?;
            if cx.global.json {
                print_json(&json!({"count": count}));
            } else {
                println!("{count}");
            }
        }
    }
    Ok(())
}

fn document_json(doc: &abi_sdk::documents::Document) -> serde_json::Value {
    json!({
        "id": doc.id,
        "version": doc.version,
        "created_at": doc.created_at.to_string(),
        "updated_at": doc.updated_at.to_string(),
        "data": data_json(&doc.data),
    })
}

fn data_json(data: &abi_sdk::documents::Data) -> serde_json::Value {
    serde_json::Value::Object(
        data.iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect::<Map<_, _>>(),
    )
}

/// A document value as JSON for people: datetimes as ISO text, bytes as
/// `base64:<text>`.
fn value_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => json!(b),
        Value::Int(n) => json!(n),
        Value::Float(x) => json!(x),
        Value::String(s) => json!(s),
        Value::Bytes(b) => json!(format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        )),
        Value::Datetime(d) => json!(d.to_string()),
        Value::List(items) => serde_json::Value::Array(items.iter().map(value_json).collect()),
        Value::Object(data) => data_json(data),
    }
}
