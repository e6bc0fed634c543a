//! Collection declarations as the catalog stores them (pydantic's
//! `model_dump_json` of `CollectionSpec`), and their merge.

use std::collections::HashSet;

use abi_document_model::validate::validate_spec;
use abi_document_model::{CollectionSpec, DocumentError, FieldSpec};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecJson {
    name: String,
    #[serde(default)]
    fields: Vec<FieldJson>,
    #[serde(default)]
    unique_together: Vec<Vec<String>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldJson {
    name: String,
    #[serde(rename = "type")]
    field_type: String,
    #[serde(default)]
    indexed: bool,
    #[serde(default)]
    unique: bool,
}

/// The catalog text of `spec`: `{"name":…,"fields":[{"name":…,"type":…,
/// "indexed":…,"unique":…}],"unique_together":[[…]]}`, compact, non-ASCII
/// kept as UTF-8, as pydantic writes it.
pub fn spec_json(spec: &CollectionSpec) -> String {
    let json = SpecJson {
        name: spec.name.clone(),
        fields: spec
            .fields
            .iter()
            .map(|f| FieldJson {
                name: f.name.clone(),
                field_type: f.field_type.clone(),
                indexed: f.indexed,
                unique: f.unique,
            })
            .collect(),
        unique_together: spec.unique_together.clone(),
    };
    // Serializing plain strings, bools and vectors cannot fail.
    serde_json::to_string(&json).unwrap_or_default()
}

/// Reads a catalog text back, with the declaration's checks.
///
/// # Errors
///
/// [`DocumentError::Storage`] when the catalog row is not a valid spec.
pub fn parse_spec(text: &str) -> Result<CollectionSpec, DocumentError> {
    let json: SpecJson = serde_json::from_str(text).map_err(|_| {
        DocumentError::Storage("The collection catalog holds a malformed spec".to_owned())
    })?;
    let spec = CollectionSpec {
        name: json.name,
        fields: json
            .fields
            .into_iter()
            .map(|f| FieldSpec {
                name: f.name,
                field_type: f.field_type,
                indexed: f.indexed,
                unique: f.unique,
            })
            .collect(),
        unique_together: json.unique_together,
    };
    validate_spec(&spec).map_err(|_| {
        DocumentError::Storage("The collection catalog holds a malformed spec".to_owned())
    })?;
    Ok(spec)
}

/// `new` merged into `old`: fields added in order, a redeclared field keeps
/// its place and gains `indexed`/`unique` (never loses them), groups added
/// unless the same set of fields is declared already; the name is `new`'s.
///
/// # Errors
///
/// `INVALID_ARGUMENT` when `new` changes a declared field's type.
pub fn merge_spec(
    old: &CollectionSpec,
    new: &CollectionSpec,
) -> Result<CollectionSpec, DocumentError> {
    let mut fields: Vec<FieldSpec> = old.fields.clone();
    for field in &new.fields {
        match fields.iter_mut().find(|f| f.name == field.name) {
            Some(previous) => {
                if previous.field_type != field.field_type {
                    return Err(DocumentError::InvalidArgument(format!(
                        "Cannot change declared type of {}; migrate the data explicitly",
                        abi_document_model::datetime::python_str_repr(&field.name)
                    )));
                }
                *previous = FieldSpec {
                    name: field.name.clone(),
                    field_type: field.field_type.clone(),
                    indexed: field.indexed || previous.indexed,
                    unique: field.unique || previous.unique,
                };
            }
            None => fields.push(field.clone()),
        }
    }
    let mut seen: Vec<HashSet<&String>> = Vec::new();
    let mut groups = Vec::new();
    for group in old.unique_together.iter().chain(&new.unique_together) {
        let set: HashSet<&String> = group.iter().collect();
        if !seen.contains(&set) {
            seen.push(set);
            groups.push(group.clone());
        }
    }
    Ok(CollectionSpec {
        name: new.name.clone(),
        fields,
        unique_together: groups,
    })
}
