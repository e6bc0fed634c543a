//! Collection declarations: typed fields, indexes and uniqueness.

/// One declared field of a collection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldSpec {
    /// The field's name (a top-level key of the documents).
    pub name: String,
    /// `string`, `int`, `float`, `bool`, `datetime`, `bytes` or `json`
    /// (checked by [`crate::validate::validate_spec`]).
    pub field_type: String,
    /// Keep an index for ordering and range queries on this field.
    pub indexed: bool,
    /// No two documents may hold the same non-null value here.
    pub unique: bool,
}

impl FieldSpec {
    /// A field of `field_type`, neither indexed nor unique.
    pub fn new(name: impl Into<String>, field_type: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            field_type: field_type.into(),
            indexed: false,
            unique: false,
        }
    }

    /// The same field, indexed.
    pub fn indexed(mut self) -> Self {
        self.indexed = true;
        self
    }

    /// The same field, unique.
    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }
}

/// The field types a [`FieldSpec`] may declare.
pub const FIELD_TYPES: [&str; 7] = [
    "string", "int", "float", "bool", "datetime", "bytes", "json",
];

/// A collection's declaration. `ensure_collection` merges it into what is
/// declared already (fields added, flags only turned on, groups added).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CollectionSpec {
    /// The collection's name.
    pub name: String,
    /// Declared fields, in declaration order.
    pub fields: Vec<FieldSpec>,
    /// Groups of fields whose values together are unique.
    pub unique_together: Vec<Vec<String>>,
}

impl CollectionSpec {
    /// A collection with nothing declared.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// The same declaration with `field` added.
    pub fn field(mut self, field: FieldSpec) -> Self {
        self.fields.push(field);
        self
    }

    /// The same declaration with a unique group added.
    pub fn unique_together<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.unique_together
            .push(fields.into_iter().map(Into::into).collect());
        self
    }
}
