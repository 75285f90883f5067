/*
 * seldon-endpoint, in C. The same plugin as plugins/rust/seldon-endpoint (Rust): same
 * manifest, settings and intents.
 *
 * Know when it's ready: watch SeldonDeployments by resource string
 * (seldondeployments.v1.machinelearning.seldon.io) and, when one *becomes* Available
 * (status.state), ask for
 *   1. an Ingress (networking.k8s.io/v1) named <sd> for host <sd>.<namespace>.<domain>,
 *      path / (Prefix) to Service <sd>-<predictor> port 8000, owned by the deployment;
 *   2. the annotation kubewasm.dev/public-url: http://<host>/ on the deployment
 *      (server-side apply, so only that annotation is this plugin's).
 * "Becomes" means: an added or resync event of an Available object, or a modified event
 * whose previous state was not Available. Updates while it stays Available (the plugin's
 * own annotation included) give no intents, so they cause no writes.
 */
#include <string.h>

#include "kubewasm.h"

#define NAME "seldon-endpoint"
#define VERSION "0.1.0"
#define WATCH_ID "seldondeployments"
#define RESOURCE "seldondeployments.v1.machinelearning.seldon.io"
#define URL_ANNOTATION "kubewasm.dev/public-url"
/* The Rust twin's type name, in decode errors ("object does not decode as ..."). */
#define SD_TYPE "seldon_endpoint::SeldonDeployment"

/* Settings (seldon-endpoint.yaml); every field is optional. */
static struct {
    const char *namespace;          /* only watch (and write in) this namespace; NULL: all */
    const char *domain;             /* DNS suffix: the host is <name>.<namespace>.<domain> */
    const char *ingress_class_name; /* spec.ingressClassName; NULL: the cluster's default */
    int32_t service_port;           /* the predictor Service's HTTP port */
} settings;

bool kw_plugin_settings(const json *s) {
    settings.namespace = NULL;
    settings.domain = "example.com";
    settings.ingress_class_name = NULL;
    settings.service_port = 8000;
    if (!s) return true;
    static const char *const fields[] = {"namespace", "domain", "ingressClassName", "servicePort",
                                         NULL};
    return kw_decode_struct(s, "struct Settings", fields, KW_DENY_UNKNOWN | KW_DENY_DUPLICATES) &&
           kw_decode_string(s, "namespace", true, &settings.namespace) &&
           kw_decode_string(s, "domain", false, &settings.domain) &&
           kw_decode_string(s, "ingressClassName", true, &settings.ingress_class_name) &&
           kw_decode_i32(s, "servicePort", false, &settings.service_port, NULL);
}

/* Watch SeldonDeployments; create Ingresses; patch SeldonDeployments. Checks the domain. */
bool kw_plugin_describe(kw_manifest *m) {
    if (!*settings.domain || settings.domain[0] == '.')
        return kw_fail("domain %q is not a DNS suffix", settings.domain);
    kw_manifest_set(m, NAME, VERSION);
    kw_watch *w = kw_watch_resource(m, WATCH_ID, RESOURCE);
    kw_grant *grants[] = {
        kw_grant_on(m, "networking.k8s.io", "Ingress", KW_VERB_CREATE),
        kw_grant_on(m, "machinelearning.seldon.io", "SeldonDeployment", KW_VERB_PATCH),
    };
    if (settings.namespace) {
        w->ns = settings.namespace;
        for (size_t i = 0; i < sizeof grants / sizeof grants[0]; i++)
            kw_grant_namespace(grants[i], settings.namespace);
    }
    return true;
}

/* The parts of a SeldonDeployment this plugin reads (unknown fields are ignored, so the real
 * CRD's huge schema does not matter). */
typedef struct {
    const char *api_version, *kind;
    const char *name, *namespace;    /* namespace: NULL when absent or null */
    const char *deletion_timestamp;  /* NULL when absent or null */
    const char *predictor;           /* spec.predictors[0].name; NULL when absent or null */
    bool available;                  /* status.state == "Available" */
} seldon_deployment;

/* A required string field: "missing field `key`" when absent. */
static bool require_string(const json *obj, const char *key, const char **out) {
    *out = NULL;
    if (!kw_decode_string(obj, key, false, out)) return false;
    if (!*out) return kw_fail("missing field `%s`", key);
    return true;
}

/* Parses and decodes one of the event's objects as the Rust twin's serde type does, with its
 * error wording ("<what> does not decode as <type>: <serde_json's message>"): apiVersion,
 * kind and metadata.name required; spec, its predictors and status optional (status may be
 * null); unknown fields ignored; a field of the wrong type is an error. (serde would also
 * take a JSON array as the struct, field by field; a cluster never sends one, and this
 * refuses it.) */
static bool decode(const char *text, size_t len, const char *what, seldon_deployment *sd) {
    static const char *const top_fields[] = {"apiVersion", "kind", "metadata", "spec", "status",
                                             NULL};
    static const char *const meta_fields[] = {"name", "namespace", "deletionTimestamp", NULL};
    static const char *const spec_fields[] = {"predictors", NULL};
    static const char *const predictor_fields[] = {"name", NULL};
    static const char *const status_fields[] = {"state", NULL};
    memset(sd, 0, sizeof *sd);
    const char *err = NULL;
    json *o = json_parse(text, len, &err);
    if (!o) return kw_fail("%s does not decode as " SD_TYPE ": %s", what, err);
    json *meta = json_get(o, "metadata"), *spec = json_get(o, "spec");
    json *status = json_get(o, "status");
    if (json_is_null(status)) status = NULL; /* Option<Status>: null is None */
    json *predictors = json_get(spec, "predictors");
    const char *state = NULL;
    bool ok = kw_decode_struct(o, "struct SeldonDeployment", top_fields, 0) &&
              require_string(o, "apiVersion", &sd->api_version) &&
              require_string(o, "kind", &sd->kind) &&
              (meta || kw_fail("missing field `metadata`")) &&
              kw_decode_struct(meta, "struct Metadata", meta_fields, 0) &&
              require_string(meta, "name", &sd->name) &&
              kw_decode_string(meta, "namespace", true, &sd->namespace) &&
              kw_decode_string(meta, "deletionTimestamp", true, &sd->deletion_timestamp) &&
              kw_decode_struct(spec, "struct Spec", spec_fields, 0) &&
              (!predictors || json_is_array(predictors) ||
               kw_fail("invalid type: %s, expected a sequence", kw_unexpected(predictors))) &&
              kw_decode_struct(status, "struct Status", status_fields, 0) &&
              kw_decode_string(status, "state", true, &state);
    for (size_t i = 0; ok && i < json_len(predictors); i++) {
        json *p = json_at(predictors, i);
        const char *name = NULL;
        ok = kw_decode_struct(p, "struct Predictor", predictor_fields, 0) &&
             kw_decode_string(p, "name", true, &name);
        if (i == 0) sd->predictor = name;
    }
    if (!ok) return kw_fail_context(kw_fmt("%s does not decode as " SD_TYPE, what));
    sd->available = kw_streq(state, "Available");
    return true;
}

/* The Ingress and the URL annotation for an Available deployment. */
static bool expose(const seldon_deployment *sd, kw_intents *out) {
    const char *name = sd->name;
    if (!*name) return kw_fail("SeldonDeployment has no metadata.name");
    const char *ns = sd->namespace;
    if (!ns || !*ns) return kw_fail("SeldonDeployment has no metadata.namespace");
    const char *host = kw_fmt("%s.%s.%s", name, ns, settings.domain);
    const char *predictor = sd->predictor && *sd->predictor ? sd->predictor : "default";
    const char *url = kw_fmt("http://%s/", host);

    json *ingress = json_object();
    json_set_str(ingress, "apiVersion", "networking.k8s.io/v1");
    json_set_str(ingress, "kind", "Ingress");
    json *meta = json_child(ingress, "metadata");
    json_set_str(meta, "name", name);
    json_set_str(meta, "namespace", ns);
    json_set_str(json_child(meta, "labels"), "app.kubernetes.io/managed-by", "kubewasm");
    json *spec = json_child(ingress, "spec");
    if (settings.ingress_class_name)
        json_set_str(spec, "ingressClassName", settings.ingress_class_name);
    json *path = json_object();
    json_set_str(path, "path", "/");
    json_set_str(path, "pathType", "Prefix");
    json *service = json_child(json_child(path, "backend"), "service");
    json_set_str(service, "name", kw_fmt("%s-%s", name, predictor));
    json_set_int(json_child(service, "port"), "number", settings.service_port);
    json *rule = json_object();
    json_set_str(rule, "host", host);
    json_set(json_child(rule, "http"), "paths", json_push(json_array(), path));
    json_set(spec, "rules", json_push(json_array(), rule));

    json *annotation = json_object();
    json_set_str(annotation, "apiVersion", sd->api_version);
    json_set_str(annotation, "kind", sd->kind);
    meta = json_child(annotation, "metadata");
    json_set_str(meta, "name", name);
    json_set_str(meta, "namespace", ns);
    json_set_str(json_child(meta, "annotations"), URL_ANNOTATION, url);

    kw_info("%s/%s is Available: exposing %s", ns, name, url);
    kw_create(out, ingress, KW_OWNED_BY_TRIGGER);
    kw_apply_patch(out, kw_ref_namespaced(sd->api_version, sd->kind, ns, name), annotation, 0);
    return true;
}

/* Exposes the deployment when this event is the moment it becomes Available; nothing
 * otherwise (deleted, not Available, being deleted, or already Available before). */
bool kw_plugin_handle(const kw_event *ev, kw_intents *out) {
    if (ev->type == KW_DELETED) return true;
    seldon_deployment now;
    if (!decode(ev->object, ev->object_len, "object", &now)) return false;
    if (!now.available || now.deletion_timestamp) return true;
    if (ev->type == KW_MODIFIED && ev->old_object) {
        seldon_deployment before;
        if (!decode(ev->old_object, ev->old_object_len, "old object", &before)) return false;
        if (before.available) return true;
    }
    return expose(&now, out);
}
