//! The fields of a cached object the host reads itself (routing, keys, logs, traces),
//! kept compact: a cache holds one per object, so what each costs is multiplied by the
//! cluster's size. Every string is in one buffer (labels sorted by key, looked up by
//! binary search) with one array of where each ends, instead of a string allocation per
//! field and a `BTreeMap` of labels (a node of eleven `String` pairs, ~550 bytes however
//! few labels an object has); apiVersion and kind are shared by a resource's objects.

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::Value;

/// An object's apiVersion and kind: one per resource, shared by the objects of its watch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ObjectType {
    /// `group/version`, or `version` for the core group.
    pub(crate) api_version: Box<str>,
    /// The kind, e.g. `MongoDB`.
    pub(crate) kind: Box<str>,
}

impl ObjectType {
    /// A type, to share.
    pub(crate) fn new(api_version: impl Into<Box<str>>, kind: impl Into<Box<str>>) -> Arc<Self> {
        Arc::new(ObjectType {
            api_version: api_version.into(),
            kind: kind.into(),
        })
    }

    /// `shared` when it names `api_version` and `kind` (the usual case), a new one
    /// otherwise.
    pub(crate) fn shared_or_new(shared: &Arc<Self>, api_version: &str, kind: &str) -> Arc<Self> {
        match *shared.api_version == *api_version && *shared.kind == *kind {
            true => shared.clone(),
            false => ObjectType::new(api_version, kind),
        }
    }
}

/// The fields [`Meta`] keeps, borrowed from a parsed object.
#[derive(Debug, Default)]
pub(crate) struct Parts<'a> {
    pub(crate) name: &'a str,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) uid: Option<&'a str>,
    pub(crate) resource_version: Option<&'a str>,
    pub(crate) generation: Option<i64>,
    /// The trace context annotation ([`super::TRACEPARENT`]).
    pub(crate) traceparent: Option<&'a str>,
    pub(crate) labels: Vec<(&'a str, &'a str)>,
}

impl<'a> Parts<'a> {
    /// The parts of a JSON object (a projected one: what is not there is absent).
    pub(crate) fn of_value(object: &'a Value) -> Self {
        let metadata = object.get("metadata");
        let field = |k: &str| metadata.and_then(|m| m.get(k));
        let text = |k: &str| field(k).and_then(Value::as_str);
        let labels = field("labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                    .collect()
            })
            .unwrap_or_default();
        Parts {
            name: text("name").unwrap_or_default(),
            namespace: text("namespace"),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            generation: field("generation").and_then(Value::as_i64),
            traceparent: field("annotations")
                .and_then(|a| a.get(super::TRACEPARENT))
                .and_then(Value::as_str),
            labels,
        }
    }
}

/// Index in [`Meta::ends`] of each fixed field; the labels follow, key then value.
const NAME: usize = 0;
const NAMESPACE: usize = 1;
const UID: usize = 2;
const RESOURCE_VERSION: usize = 3;
const TRACEPARENT: usize = 4;
const FIXED: usize = 5;

/// The fields of one object the host reads, compact (see the module).
#[derive(Debug)]
pub(crate) struct Meta {
    types: Arc<ObjectType>,
    generation: Option<i64>,
    /// Which of the fixed fields are present (bit `i`: field `i`), to tell absent from empty.
    present: u8,
    /// Every string, concatenated: the fixed fields in order, then each label's key and
    /// value, by key.
    text: Box<str>,
    /// Where each string of `text` ends.
    ends: Box<[u32]>,
}

impl Meta {
    /// Keep `parts` of an object of type `types`. A label given twice keeps its first value.
    pub(crate) fn new(types: Arc<ObjectType>, mut parts: Parts<'_>) -> Self {
        parts.labels.sort_by_key(|(k, _)| *k);
        parts.labels.dedup_by_key(|(k, _)| *k);
        let fixed = [
            Some(parts.name),
            parts.namespace,
            parts.uid,
            parts.resource_version,
            parts.traceparent,
        ];
        let present = (0..FIXED)
            .filter(|&i| fixed[i].is_some())
            .fold(0u8, |p, i| p | 1 << i);
        let strings = fixed
            .iter()
            .map(|s| s.unwrap_or_default())
            .chain(parts.labels.iter().flat_map(|(k, v)| [*k, *v]));
        let mut text = String::with_capacity(strings.clone().map(str::len).sum());
        let mut ends = Vec::with_capacity(FIXED + 2 * parts.labels.len());
        for s in strings {
            text.push_str(s);
            // An object's text is bounded by the API server's request limit (3 MiB), far
            // below u32::MAX; saturating only makes an impossible one read as empty.
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        }
        Meta {
            types,
            generation: parts.generation,
            present,
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    /// The `i`th string ("" past the end).
    fn string(&self, i: usize) -> &str {
        let start = match i {
            0 => 0,
            i => self.ends.get(i - 1).copied().unwrap_or(0),
        };
        let end = self.ends.get(i).copied().unwrap_or(0);
        self.text
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// The `i`th fixed field, if the object has it.
    fn fixed(&self, i: usize) -> Option<&str> {
        (self.present & (1 << i) != 0).then(|| self.string(i))
    }

    /// Its apiVersion and kind.
    pub(crate) fn types(&self) -> &ObjectType {
        &self.types
    }

    /// Its name ("" when it had none).
    pub(crate) fn name(&self) -> &str {
        self.string(NAME)
    }

    /// Its namespace (None: cluster-scoped).
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.fixed(NAMESPACE)
    }

    /// Its uid.
    pub(crate) fn uid(&self) -> Option<&str> {
        self.fixed(UID)
    }

    /// Its resourceVersion.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.fixed(RESOURCE_VERSION)
    }

    /// Its metadata.generation.
    pub(crate) fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// Its trace context annotation.
    pub(crate) fn traceparent(&self) -> Option<&str> {
        self.fixed(TRACEPARENT)
    }

    fn label_count(&self) -> usize {
        self.ends.len().saturating_sub(FIXED) / 2
    }

    /// The value of the label `key`, if the object has it.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        let (mut low, mut high) = (0, self.label_count());
        while low < high {
            let mid = low + (high - low) / 2;
            match self.string(FIXED + 2 * mid).cmp(key) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Some(self.string(FIXED + 2 * mid + 1)),
            }
        }
        None
    }

    /// Every label, by key.
    #[cfg(test)]
    pub(crate) fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        (0..self.label_count())
            .map(|i| (self.string(FIXED + 2 * i), self.string(FIXED + 2 * i + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_core::selector::LabelSelector;
    use serde_json::json;

    fn types() -> Arc<ObjectType> {
        ObjectType::new("mongodb.com/v1", "MongoDB")
    }

    fn selects(meta: &Meta, selector: &str) -> bool {
        LabelSelector::parse(selector)
            .unwrap()
            .matches_with(|k| meta.label(k))
    }

    #[test]
    fn every_field_round_trips_and_absent_is_not_empty() {
        let parts = Parts {
            name: "one",
            namespace: Some("a"),
            uid: Some(""),
            resource_version: Some("7"),
            generation: Some(-3),
            traceparent: None,
            labels: vec![("z", ""), ("app", "x"), ("é/ü", "ß")],
        };
        let m = Meta::new(types(), parts);
        assert_eq!(
            (m.name(), m.namespace(), m.uid()),
            ("one", Some("a"), Some(""))
        );
        assert_eq!(
            (m.resource_version(), m.generation()),
            (Some("7"), Some(-3))
        );
        assert_eq!(m.traceparent(), None);
        assert_eq!(
            m.labels().collect::<Vec<_>>(),
            [("app", "x"), ("z", ""), ("é/ü", "ß")]
        );
        assert_eq!((m.label("z"), m.label("é/ü")), (Some(""), Some("ß")));
        assert_eq!((m.label("ap"), m.label("")), (None, None));
        assert_eq!(*m.types(), *types());
    }

    #[test]
    fn an_object_with_nothing_but_a_name_has_nothing_else() {
        let m = Meta::new(types(), Parts::default());
        assert_eq!((m.name(), m.namespace(), m.uid()), ("", None, None));
        assert_eq!((m.resource_version(), m.generation()), (None, None));
        assert_eq!(m.labels().count(), 0);
        assert_eq!(m.label("app"), None);
        assert!(selects(&m, "!app,app notin (x)"));
        assert!(!selects(&m, "app"));
    }

    #[test]
    fn selectors_match_compact_labels_as_they_match_a_map() {
        let labels = json!({"app": "web", "tier": "3", "team": "db", "b": "", "a.io/x": "y"});
        let map: std::collections::BTreeMap<String, String> =
            serde_json::from_value(labels.clone()).unwrap();
        let object = json!({"metadata": {"name": "n", "labels": labels}});
        let m = Meta::new(types(), Parts::of_value(&object));
        for selector in [
            "app=web",
            "app!=web",
            "app in (web,api),tier>2",
            "tier<3",
            "team notin (db)",
            "missing",
            "!missing,b",
            "b=",
            "a.io/x=y,app==web",
            "",
        ] {
            let s = LabelSelector::parse(selector).unwrap();
            assert_eq!(
                s.matches_with(|k| m.label(k)),
                s.matches(&map),
                "{selector}"
            );
        }
    }

    #[test]
    fn many_and_long_labels_are_all_found() {
        let long = "v".repeat(70_000);
        let keys: Vec<String> = (0..300).map(|i| format!("k{i:03}")).collect();
        let labels = keys
            .iter()
            .rev()
            .map(|k| (k.as_str(), long.as_str()))
            .collect();
        let parts = Parts {
            name: "n",
            traceparent: Some("00-trace"),
            labels,
            ..Parts::default()
        };
        let m = Meta::new(types(), parts);
        assert_eq!(m.labels().count(), 300);
        assert!(keys.iter().all(|k| m.label(k) == Some(long.as_str())));
        assert_eq!(m.label("k300"), None);
        assert_eq!((m.name(), m.traceparent()), ("n", Some("00-trace")));
    }

    #[test]
    fn parts_of_a_json_object_skip_what_is_not_text() {
        let object = json!({"metadata": {
            "name": "n", "namespace": "a", "uid": "u", "resourceVersion": "5", "generation": 2,
            "labels": {"app": "x", "count": 3},
            "annotations": {"tracing.k8s.io/traceparent": "00-t", "other": "o"}
        }});
        let m = Meta::new(types(), Parts::of_value(&object));
        assert_eq!(
            (m.name(), m.namespace(), m.uid()),
            ("n", Some("a"), Some("u"))
        );
        assert_eq!((m.resource_version(), m.generation()), (Some("5"), Some(2)));
        assert_eq!(m.labels().collect::<Vec<_>>(), [("app", "x")]);
        assert_eq!(m.traceparent(), Some("00-t"));
        let bare = Meta::new(types(), Parts::of_value(&json!({"spec": {}})));
        assert_eq!((bare.name(), bare.namespace()), ("", None));
    }
}
