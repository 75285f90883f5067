/*
 * kubewasm.h: write kubewasm plugins in C.
 *
 * A thin layer over the wit-bindgen C bindings of wit/plugin.wit. A plugin is three
 * functions (below, "What a plugin implements"); the layer exports `describe` and `handle`,
 * parses the settings and the event's objects into json values (json.h), turns the plugin's
 * manifest and intents into the WIT types, and frees everything after each call.
 *
 * Memory: everything this layer and json.h hand out lives in an arena that is freed after
 * each describe/handle call. Plugin code never calls free(), and must not keep pointers
 * across calls (plugins are stateless: the host may use a fresh instance for any event).
 *
 * Errors: functions that can fail return false (or NULL) after recording the error with
 * kw_fail / kw_fail_retry; pass that false on up to the layer. The semantics and error
 * messages follow the Rust SDK (plugins/rust/sdk), so a C plugin and a Rust plugin written the
 * same way give the same intents and errors.
 */
#ifndef KUBEWASM_H
#define KUBEWASM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ events, manifest, intents */

typedef enum { KW_ADDED, KW_MODIFIED, KW_DELETED, KW_RESYNC } kw_event_type;

/* One change to one object, as the host delivers it. Strings are NUL-terminated. */
typedef struct {
    kw_event_type type;
    const char *watch_id;   /* the id of the watch that matched */
    const char *object;     /* the object, JSON text */
    size_t object_len;
    const char *old_object; /* modified: the previous object, JSON text; else NULL */
    size_t old_object_len;
} kw_event;

/* The object as a JSON object; NULL (permanent error) when it is not valid JSON or not an
 * object. Parsed once per call and cached. */
json *kw_event_object(const kw_event *ev);
/* The previous object of a modified event: true with *out (NULL when there is none); false
 * (permanent error) when it is malformed. */
bool kw_event_old_object(const kw_event *ev, json **out);

/* Verbs of a grant (bit flags). In the manifest they are listed in this order. */
enum {
    KW_VERB_CREATE = 1,
    KW_VERB_PATCH = 2,
    KW_VERB_PATCH_STATUS = 4,
    KW_VERB_DELETE = 8,
};

typedef struct {
    const char *id;
    /* By kind (resource == NULL): api_version + kind. By resource argument: resource, e.g.
     * "seldondeployments.v1.machinelearning.seldon.io". */
    const char *api_version, *kind, *resource;
    const char *ns;             /* only this namespace; NULL: all */
    const char *label_selector; /* NULL: none */
    const char *field_selector; /* NULL: none */
    /* The fields the plugin uses (its projection; kw_watch_field adds one). None: whole
     * objects. */
    const char **fields;
    size_t n_fields;
} kw_watch;

typedef struct {
    const char **api_groups; /* "" core, "*" any */
    size_t n_api_groups;
    const char **kinds; /* "*" any */
    size_t n_kinds;
    const char **namespaces; /* none: every namespace */
    size_t n_namespaces;
    unsigned verbs; /* KW_VERB_* */
    bool allow_force;
} kw_grant;

typedef struct {
    const char *api_version, *kind, *resource; /* as in kw_watch */
    const char **fields;                       /* as in kw_watch */
    size_t n_fields;
} kw_read;

typedef struct {
    const char *name;    /* letters, digits, '-', at most 63 */
    const char *version; /* free text */
    kw_watch *watches;
    size_t n_watches;
    kw_grant *grants;
    size_t n_grants;
    kw_read *reads;
    size_t n_reads;
} kw_manifest;

/* Sets the manifest's name and version. */
void kw_manifest_set(kw_manifest *m, const char *name, const char *version);
/* Adds a watch by apiVersion and kind / by resource argument; returns it so you can set
 * ->ns, ->label_selector, ->field_selector (copy the strings with json_strdup if they are
 * not literals or arena strings). */
kw_watch *kw_watch_kind(kw_manifest *m, const char *id, const char *api_version, const char *kind);
kw_watch *kw_watch_resource(kw_manifest *m, const char *id, const char *resource);
/* Adds a grant on one kind of one API group ("" for core) with verbs (KW_VERB_* ORed). */
kw_grant *kw_grant_on(kw_manifest *m, const char *api_group, const char *kind, unsigned verbs);
void kw_grant_group(kw_grant *g, const char *api_group);    /* also cover this group */
void kw_grant_kind(kw_grant *g, const char *kind);          /* also cover this kind */
void kw_grant_namespace(kw_grant *g, const char *ns);       /* restrict to (or add) a namespace */
/* Declares a field the watch uses, e.g. "spec.database", "status.phase", "metadata.labels":
 * its projection. Events (and kw_get/kw_list of the kind) then carry only the declared
 * fields and the object's identity (apiVersion, kind, metadata.name, namespace, uid,
 * resourceVersion); a watch declaring none gets whole objects. A field is a path of keys
 * joined by '.'; it keeps the whole value it reaches, a path crossing a list applies to every
 * element ("spec.containers.image"), and "metadata" alone is a metadata-only projection. A
 * key containing '.' (a label) is kept through its parent ("metadata.labels"). */
void kw_watch_field(kw_watch *w, const char *path);
/* Extra kinds readable through kw_get/kw_list beyond the watches; returns the read so you
 * can declare its fields with kw_read_field (none: whole objects). */
kw_read *kw_read_kind(kw_manifest *m, const char *api_version, const char *kind);
kw_read *kw_read_resource(kw_manifest *m, const char *resource);
void kw_read_field(kw_read *r, const char *path); /* as kw_watch_field */
/* What the host checks on load (the layer calls it after kw_plugin_describe): the name's
 * shape, at least one watch, unique non-empty watch ids. */
bool kw_manifest_validate(const kw_manifest *m);

/* Which object an intent acts on. */
typedef struct {
    const char *api_version, *kind;
    const char *ns; /* NULL for cluster-scoped objects */
    const char *name;
} kw_ref;

kw_ref kw_ref_namespaced(const char *api_version, const char *kind, const char *ns, const char *name);
kw_ref kw_ref_cluster(const char *api_version, const char *kind, const char *name);
/* The reference of an object (apiVersion, kind, metadata.namespace if any, metadata.name);
 * false (permanent error "object has no ...") when one is missing. */
bool kw_ref_of(const json *object, kw_ref *out);

/* Intent options (bit flags). */
enum {
    KW_OWNED_BY_TRIGGER = 1, /* create: controller ownerReference to the triggering object */
    KW_FORCE = 2,            /* create / apply patch: take fields from other managers */
    KW_STATUS = 4,           /* patch: the status subresource */
};

typedef enum {
    KW_PROPAGATION_DEFAULT, /* the server's default for the kind */
    KW_BACKGROUND,
    KW_FOREGROUND,
    KW_ORPHAN,
} kw_propagation;

typedef enum { KW_INTENT_CREATE, KW_INTENT_PATCH, KW_INTENT_DELETE } kw_intent_kind;

/* One intent, as the builders below record it (read it in native tests). */
typedef struct {
    kw_intent_kind kind;
    const char *json; /* create: the object; patch: the body (compact JSON) */
    size_t json_len;
    kw_ref target;    /* patch, delete */
    unsigned flags;   /* KW_OWNED_BY_TRIGGER, KW_FORCE, KW_STATUS */
    bool merge;       /* patch: JSON merge patch instead of server-side apply */
    const char *uid, *resource_version; /* delete preconditions, NULL: none */
    kw_propagation propagation;
} kw_intent;

/* The intents a handle call returns, in order. */
typedef struct kw_intents {
    kw_intent *items;
    size_t len, cap;
} kw_intents;

/* Create or converge a whole object with server-side apply (the object is serialized now). */
void kw_create(kw_intents *out, const json *object, unsigned flags);
/* Server-side apply of a partial object to target (flags: KW_STATUS, KW_FORCE). */
void kw_apply_patch(kw_intents *out, kw_ref target, const json *body, unsigned flags);
/* JSON merge patch (RFC 7386) of target (flags: KW_STATUS). */
void kw_merge_patch(kw_intents *out, kw_ref target, const json *body, unsigned flags);
/* Delete target; uid / resource_version preconditions may be NULL. */
void kw_delete(kw_intents *out, kw_ref target, const char *uid, const char *resource_version,
               kw_propagation propagation);
size_t kw_intents_len(const kw_intents *out);

/* ================================================================ what a plugin implements */

/* Decode the settings (the NAME.yaml/NAME.json beside the .wasm, as JSON) into your own
 * static struct. settings is NULL when there is no file (or it is empty or null): set the
 * defaults. Called before every describe and handle. On failure call kw_fail(...) and
 * return false: describe fails with, and handle returns a permanent error, "invalid
 * settings: <your message>". The kw_decode_* helpers below give serde-like checks. */
bool kw_plugin_settings(const json *settings);

/* Fill the manifest. false (after kw_fail) rejects the plugin with that message. */
bool kw_plugin_describe(kw_manifest *m);

/* Turn one event into intents (append to out). false after kw_fail / kw_fail_retry
 * returns that error to the host (with retry false / true); no intents are applied. */
bool kw_plugin_handle(const kw_event *ev, kw_intents *out);

/* ================================================================ errors, strings, logging */

/* Records a permanent error (retry false) / a transient one (retry true); return false. The
 * message is formatted with kw_fmt. The first error of a call wins. */
bool kw_fail(const char *fmt, ...);
bool kw_fail_retry(const char *fmt, ...);
/* Prefixes the recorded error with context ("<context>: <message>") and makes it permanent,
 * like the Rust SDK's `.permanent("context")?`; returns false. */
bool kw_fail_context(const char *context);
bool kw_failed(void);
const char *kw_error_message(void); /* NULL when none */
bool kw_error_retry(void);
void kw_error_clear(void);

/* A printf-like formatter into the arena, without libc's printf (small components).
 * Supports %s (NULL: "(null)"), %.*s, %d %i %u %ld %lu %lld %llu %zu (and PRId64/PRIu64),
 * %c, %%, plus %q: a string quoted like Rust's {:?} ("a\"b"), %j: a json value as compact
 * JSON. No widths or precision (other than %.*s). */
char *kw_fmt(const char *fmt, ...);

/* NULL-safe string equality. */
bool kw_streq(const char *a, const char *b);

typedef enum { KW_TRACE, KW_DEBUG, KW_INFO, KW_WARN, KW_ERROR } kw_level;

/* One line to the host's log, tagged by the host with the plugin and the object. */
void kw_log(kw_level level, const char *fmt, ...);
#define kw_trace(...) kw_log(KW_TRACE, __VA_ARGS__)
#define kw_debug(...) kw_log(KW_DEBUG, __VA_ARGS__)
#define kw_info(...) kw_log(KW_INFO, __VA_ARGS__)
#define kw_warn(...) kw_log(KW_WARN, __VA_ARGS__)
#define kw_error(...) kw_log(KW_ERROR, __VA_ARGS__)

/* ================================================================ objects */

const char *kw_api_version(const json *o);    /* apiVersion or NULL */
const char *kw_kind(const json *o);           /* kind */
const char *kw_name(const json *o);           /* metadata.name */
const char *kw_namespace(const json *o);      /* metadata.namespace */
const char *kw_uid(const json *o);            /* metadata.uid */
const char *kw_resource_version(const json *o);
bool kw_generation(const json *o, int64_t *out); /* metadata.generation, an integer */
const char *kw_label(const json *o, const char *key);
const char *kw_annotation(const json *o, const char *key);
/* metadata.deletionTimestamp is set (not null): the object is going away. */
bool kw_is_being_deleted(const json *o);
/* metadata.name, or NULL after kw_fail("object has no metadata.name") when missing or "". */
const char *kw_require_name(const json *o);
/* The API group of an apiVersion ("" for "v1"). */
const char *kw_api_group(const char *api_version);

/* An ownerReferences entry for owner (apiVersion, kind, name, uid required, else NULL after
 * kw_fail). controller: also controller: true, blockOwnerDeletion: true. */
json *kw_owner_reference(const json *owner, bool controller);
/* Adds ref to object's metadata.ownerReferences, replacing one with the same uid. */
bool kw_add_owner_reference(json *object, const json *ref);
bool kw_is_owned_by(const json *object, const char *owner_uid);

/* A status condition (metav1.Condition): {"type": type, "status": "True"|"False"}. */
json *kw_condition(const char *type, bool status);
json *kw_condition_unknown(const char *type); /* status "Unknown" */
/* Setters return the condition; "" / NULL removes the field (as the Rust SDK omits it). */
json *kw_condition_reason(json *c, const char *reason);
json *kw_condition_message(json *c, const char *message);
/* observedGeneration from object's metadata.generation (removed when it has none). */
json *kw_condition_observed_generation_of(json *c, const json *object);
/* lastTransitionTime: kept from object's status.conditions entry of the same type when its
 * status is unchanged (so re-applying is a no-op), else now. */
json *kw_condition_transitioned_from(json *c, const json *object);
/* The current UTC time / a Unix time as RFC 3339 ("2026-01-02T03:04:05Z"). */
char *kw_now_rfc3339(void);
char *kw_format_rfc3339(uint64_t unix_secs);

/* ================================================================ reading the host's caches */

/* One object from the host's cache (a kind the plugin watches or reads). Returns 1 with *out,
 * 0 when there is no such object, -1 after kw_fail_retry when the host refuses. */
int kw_get(const char *api_version, const char *kind, const char *ns, const char *name, json **out);
/* The objects of a kind (ns NULL: all namespaces; label_selector may be NULL) as a JSON array,
 * or NULL after kw_fail_retry. */
json *kw_list(const char *api_version, const char *kind, const char *ns, const char *label_selector);

/* ================================================================ decoding settings */

/* serde-like checks with serde's messages, e.g. "unknown field `datbase`, expected one of
 * `namespace`, `database`, `service`" or "invalid type: string \"x\", expected u32".
 * Each returns false after kw_fail. A missing key leaves *out unchanged (your default). */

enum {
    KW_DENY_UNKNOWN = 1,    /* #[serde(deny_unknown_fields)]: keys not in fields are errors */
    KW_DENY_DUPLICATES = 2, /* repeated keys are errors (serde does this when decoding text,
                               i.e. for settings; a parsed object keeps the last one) */
};
/* v must be an object (what = "struct Settings" in messages) with keys among fields
 * (NULL-terminated) as flags say. v NULL (absent) is fine: keep your defaults. */
bool kw_decode_struct(const json *v, const char *what, const char *const *fields, unsigned flags);
/* A string field; null is an error unless nullable (then *out = NULL). */
bool kw_decode_string(const json *obj, const char *key, bool nullable, const char **out);
/* Integer fields; *present (may be NULL) tells whether a value was there (null counts as
 * absent when nullable). */
bool kw_decode_u32(const json *obj, const char *key, bool nullable, uint32_t *out, bool *present);
bool kw_decode_i32(const json *obj, const char *key, bool nullable, int32_t *out, bool *present);
/* An object whose values are all strings (a map<string, string>); *out is the object. */
bool kw_decode_string_map(const json *obj, const char *key, json **out);
/* How serde names a JSON value in "invalid type" messages: "string \"x\"", "integer `5`",
 * "map", ... */
const char *kw_unexpected(const json *v);

#ifdef __cplusplus
}
#endif

#endif
