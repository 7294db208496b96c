//! Expression attribute names and values, registered as they are used: DynamoDB refuses a
//! request that declares a name or value its expressions do not use.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

#[derive(Default)]
pub(crate) struct Expr {
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl Expr {
    /// `#attr`, declared.
    pub fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    /// `:key`, declared with `value`.
    pub fn value(&mut self, key: &str, value: AttributeValue) -> String {
        let placeholder = format!(":{key}");
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    pub fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    pub fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}
