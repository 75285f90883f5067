/*
 * {{name}}: every ConfigMap labelled kubewasm.dev/copy: "true" gets a copy named
 * <name>-<suffix> in its namespace, annotated kubewasm.dev/copied-from: <ns>/<name> and
 * owned by the original (so it is garbage-collected with it). The copy carries no labels,
 * so it is not copied again.
 *
 * The layer (deps/kubewasm-c: kubewasm.h, json.h) does the WIT bindings, memory and
 * conversions; a plugin is these three functions.
 */
#include "kubewasm.h"

#define NAME "{{name}}"
#define WATCH_ID "configmaps"
#define SELECTOR "kubewasm.dev/copy=true"
#define COPIED_FROM "kubewasm.dev/copied-from"

/* Settings ({{name}}.yaml); every field is optional. */
static struct {
    const char *suffix; /* the copy of NAME is called NAME-<suffix> */
} settings;

bool kw_plugin_settings(const json *s) {
    settings.suffix = "copy"; /* defaults first: the instance may be reused */
    if (!s) return true;
    static const char *const fields[] = {"suffix", NULL};
    return kw_decode_struct(s, "struct Settings", fields, KW_DENY_UNKNOWN | KW_DENY_DUPLICATES) &&
           kw_decode_string(s, "suffix", false, &settings.suffix);
}

bool kw_plugin_describe(kw_manifest *m) {
    kw_manifest_set(m, NAME, "0.1.0");
    kw_watch *w = kw_watch_kind(m, WATCH_ID, "v1", "ConfigMap"); /* what to receive */
    w->label_selector = SELECTOR;
    kw_grant_on(m, "", "ConfigMap", KW_VERB_CREATE); /* what it may write */
    return true;
}

bool kw_plugin_handle(const kw_event *ev, kw_intents *out) {
    if (ev->type == KW_DELETED) return true; /* the copy is owned by the original: GC removes it */
    json *cm = kw_event_object(ev);          /* malformed JSON: a permanent error */
    if (!cm) return false;
    if (kw_is_being_deleted(cm)) return true;
    const char *name = kw_require_name(cm);
    if (!name) return false;
    const char *ns = kw_namespace(cm);
    if (!ns) return kw_fail("ConfigMap has no metadata.namespace");
    const char *copy_name = kw_fmt("%s-%s", name, settings.suffix);
    kw_info("copying ConfigMap %s/%s to %s", ns, name, copy_name);

    json *copy = json_object();
    json_set_str(copy, "apiVersion", "v1");
    json_set_str(copy, "kind", "ConfigMap");
    json *meta = json_child(copy, "metadata");
    json_set_str(meta, "name", copy_name);
    json_set_str(meta, "namespace", ns);
    json_set_str(json_child(meta, "annotations"), COPIED_FROM, kw_fmt("%s/%s", ns, name));
    json *data = json_get(cm, "data");
    json_set(copy, "data", json_is_object(data) ? json_clone(data) : json_object());
    kw_create(out, copy, KW_OWNED_BY_TRIGGER);
    return true;
}
