//! The object a call is about ([`Trigger`]) and an intent admitted for it ([`Prepared`]).

use serde_json::{Value, json};

use super::BindError;
use crate::grant::Access;
use crate::intent::{Action, Intent};
use crate::kind::KindInfo;

/// The object whose event is being handled, as far as intents refer to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trigger {
    /// `group/version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace (None: cluster-scoped).
    pub namespace: Option<String>,
    /// uid, when the object has one (objects from a cluster always do).
    pub uid: Option<String>,
}

impl Trigger {
    /// Read the identity of a JSON object.
    pub fn from_json(object: &Value) -> Self {
        let s = |p: &str| {
            object
                .pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Trigger {
            api_version: s("/apiVersion").unwrap_or_default(),
            kind: s("/kind").unwrap_or_default(),
            name: s("/metadata/name").unwrap_or_default(),
            namespace: s("/metadata/namespace"),
            uid: s("/metadata/uid"),
        }
    }

    /// `Kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The controller ownerReference an `owned-by-trigger` intent gets.
    pub(crate) fn owner_reference(&self) -> Result<Value, BindError> {
        let Some(uid) = &self.uid else {
            return Err(BindError::TriggerIncomplete);
        };
        if self.api_version.is_empty() || self.kind.is_empty() || self.name.is_empty() {
            return Err(BindError::TriggerIncomplete);
        }
        Ok(json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }))
    }
}

/// An intent bound to a served resource and a namespace, ready to execute.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The decoded intent (namespace filled in, ownerReference added when asked).
    pub intent: Intent,
    /// The resource it writes.
    pub kind: KindInfo,
    /// The namespace it writes in (None: cluster-scoped).
    pub namespace: Option<String>,
    /// `group/version` of the resolved resource (what grants are checked against).
    pub(super) resolved_api_version: String,
}

impl Prepared {
    /// What the grant check needs: the resolved resource's group, kind and scope, not
    /// the intent's own strings.
    pub fn access(&self) -> Access<'_> {
        Access {
            api_version: &self.resolved_api_version,
            kind: &self.kind.kind,
            namespace: self.namespace.as_deref(),
            verb: self.intent.verb,
            force: self.intent.force,
        }
    }

    /// Whether this intent writes the trigger itself (the same object under any version
    /// of its group).
    pub(crate) fn targets(&self, trigger: &Trigger) -> bool {
        let group = trigger
            .api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group);
        group == self.kind.group
            && trigger.kind == self.kind.kind
            && trigger.name == self.intent.target.name
            && trigger.namespace == self.namespace
    }

    /// Whether this write is to the trigger as the plugin saw it, so that finding no such
    /// object means the trigger was deleted (or replaced) during the call: a status write
    /// or a merge patch of the trigger (which need the object), or an apply naming the
    /// trigger's uid (which kube-apiserver never creates). A body naming another uid is
    /// the plugin's mistake, not a deletion; an apply without a uid creates the object.
    pub fn requires_trigger(&self, trigger: &Trigger) -> bool {
        if !self.targets(trigger) {
            return false;
        }
        let (body, needs_object) = match &self.intent.action {
            Action::Apply { body, status } => (body, *status),
            Action::Merge { body, .. } => (body, true),
            Action::Delete { .. } => return false,
        };
        match body
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
        {
            Some(uid) => trigger.uid.as_deref() == Some(uid),
            None => needs_object,
        }
    }

    /// `create MongoDB shop/site-db` for logs.
    pub fn describe(&self) -> String {
        let ns = self
            .namespace
            .as_ref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        format!(
            "{} {} {ns}{}",
            self.intent.verb.as_str(),
            self.intent.target.kind,
            self.intent.target.name
        )
    }
}
