//! Expression attribute names and values, registered as they are used: DynamoDB refuses a
//! request that declares a name or value its expressions do not use, so what a request gets is
//! what its expression texts mention ([`Expr::names`], [`Expr::values`]), never more.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

#[derive(Default)]
pub(crate) struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
    /// The expression texts given to [`Self::used_in`]; empty: every placeholder is used.
    texts: Vec<String>,
}

impl Expr {
    /// `#attr`, declared.
    pub fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    /// `#key`, declared as the attribute `attr`: for a name that is data (a resource's, as a
    /// map's key), which no placeholder could be spelled from.
    pub fn name_of(&mut self, key: &str, attr: &str) -> String {
        let placeholder = format!("#{key}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    /// `:key`, declared with `value`.
    pub fn value(&mut self, key: &str, value: AttributeValue) -> String {
        let placeholder = format!(":{key}");
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// Keep only the placeholders `texts` mention: for expressions built from parts that do
    /// not each use every name declared (a release's update mentions no token).
    pub fn used_in(mut self, texts: &[&str]) -> Self {
        self.texts = texts.iter().map(|t| (*t).to_owned()).collect();
        self
    }

    fn used(&self, placeholder: &str) -> bool {
        self.texts.is_empty() || self.texts.iter().any(|t| mentions(t, placeholder))
    }

    /// The names to send with the request.
    pub fn names(&self) -> Option<HashMap<String, String>> {
        self.in_use(&self.names)
    }

    /// The values to send with the request.
    pub fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        self.in_use(&self.values)
    }

    fn in_use<V: Clone>(&self, declared: &HashMap<String, V>) -> Option<HashMap<String, V>> {
        let used: HashMap<String, V> = declared
            .iter()
            .filter(|(placeholder, _)| self.used(placeholder))
            .map(|(placeholder, v)| (placeholder.clone(), v.clone()))
            .collect();
        (!used.is_empty()).then_some(used)
    }
}

/// Whether `text` uses `placeholder` as a whole token (`#exp` is not in `#expires`).
fn mentions(text: &str, placeholder: &str) -> bool {
    text.match_indices(placeholder).any(|(at, _)| {
        text[at + placeholder.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gets_exactly_the_placeholders_its_texts_use() {
        let mut e = Expr::default();
        let (exp, expires) = (e.name("exp"), e.name("expires"));
        let now = e.value("now", AttributeValue::N("1".into()));
        e.value("unused", AttributeValue::N("2".into()));
        let e = e.used_in(&[&format!("SET {expires} = {now}")]);
        assert_eq!(
            e.names(),
            Some(HashMap::from([(expires.clone(), "expires".to_owned())]))
        );
        assert!(
            !e.names().unwrap().contains_key(&exp),
            "#exp is not #expires"
        );
        assert_eq!(e.values().map(|v| v.len()), Some(1));
        // Without texts, everything declared is used.
        let mut all = Expr::default();
        all.name("a");
        assert_eq!(all.names().map(|n| n.len()), Some(1));
        assert_eq!(all.values(), None);
    }
}
