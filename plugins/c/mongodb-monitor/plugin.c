/*
 * mongodb-monitor, in C. The same plugin as plugins/rust/mongodb-monitor (Rust): same manifest,
 * settings and intents.
 *
 * Watch what you don't own: for every MongoDB (mongodb.com/v1) in any namespace, whoever
 * created it, ask for a Prometheus Operator ServiceMonitor (monitoring.coreos.com/v1) named
 * <db>-monitor in the same namespace, selecting the database's Services (app: <db>) and
 * scraping their metrics port. The ServiceMonitor is owned by the MongoDB, so a deleted
 * event needs no intents. It uses nothing of a MongoDB but its identity and
 * metadata.deletionTimestamp, and declares so (FIELD): the host delivers and caches only
 * those.
 */
#include <string.h>

#include "kubewasm.h"

#define NAME "mongodb-monitor"
#define VERSION "0.1.0"
#define WATCH_ID "mongodbs"
/* The field of a MongoDB the plugin uses beyond its identity (apiVersion, kind, name,
 * namespace, uid), which the host always keeps: its projection. */
#define FIELD "metadata.deletionTimestamp"

/* Settings (mongodb-monitor.yaml); every field is optional. */
static struct {
    const char *namespace; /* only watch (and write in) this namespace; NULL: all */
    const char *interval;  /* scrape interval, a Prometheus duration */
    const char *port;      /* the Service port name that serves metrics */
    json *labels;          /* extra labels on the ServiceMonitor (string map), or NULL */
} settings;

bool kw_plugin_settings(const json *s) {
    settings.namespace = NULL;
    settings.interval = "30s";
    settings.port = "metrics";
    settings.labels = NULL;
    if (!s) return true;
    static const char *const fields[] = {"namespace", "interval", "port", "labels", NULL};
    return kw_decode_struct(s, "struct Settings", fields, KW_DENY_UNKNOWN | KW_DENY_DUPLICATES) &&
           kw_decode_string(s, "namespace", true, &settings.namespace) &&
           kw_decode_string(s, "interval", false, &settings.interval) &&
           kw_decode_string(s, "port", false, &settings.port) &&
           kw_decode_string_map(s, "labels", &settings.labels);
}

/* Whether s is a Prometheus duration: one or more <digits><unit> with units y, w, d, h, m,
 * s, ms in that order ("0" alone too). */
static bool is_prometheus_duration(const char *s) {
    static const char *const units[] = {"y", "w", "d", "h", "ms", "m", "s"};
    static const int ranks[] = {0, 1, 2, 3, 6, 4, 5}; /* ms comes last */
    if (strcmp(s, "0") == 0) return true;
    if (!*s) return false;
    int last = -1;
    while (*s) {
        const char *d = s;
        while (*s >= '0' && *s <= '9') s++;
        if (s == d) return false;
        int found = -1;
        for (int i = 0; i < 7 && found < 0; i++)
            if (strncmp(s, units[i], strlen(units[i])) == 0) found = i;
        if (found < 0 || ranks[found] <= last) return false;
        last = ranks[found];
        s += strlen(units[found]);
    }
    return true;
}

/* Watch MongoDBs; create ServiceMonitors. Checks the settings first. */
bool kw_plugin_describe(kw_manifest *m) {
    if (!is_prometheus_duration(settings.interval))
        return kw_fail("interval %q is not a Prometheus duration (e.g. 30s, 1m30s)", settings.interval);
    if (!*settings.port) return kw_fail("port must not be empty");
    kw_manifest_set(m, NAME, VERSION);
    kw_watch *w = kw_watch_kind(m, WATCH_ID, "mongodb.com/v1", "MongoDB");
    kw_watch_field(w, FIELD);
    kw_grant *g = kw_grant_on(m, "monitoring.coreos.com", "ServiceMonitor", KW_VERB_CREATE);
    if (settings.namespace) {
        w->ns = settings.namespace;
        kw_grant_namespace(g, settings.namespace);
    }
    return true;
}

/* The ServiceMonitor for one MongoDB, or NULL after kw_fail. */
static json *service_monitor_for(const json *db) {
    const char *av = kw_api_version(db), *kind = kw_kind(db);
    if (!kw_streq(av, "mongodb.com/v1") || !kw_streq(kind, "MongoDB"))
        return kw_fail("expected a mongodb.com/v1 MongoDB, got %s %s", av ? av : "?", kind ? kind : "?"), NULL;
    const char *name = kw_require_name(db);
    if (!name) return NULL;
    const char *ns = kw_namespace(db);
    if (!ns) return kw_fail("MongoDB has no metadata.namespace"), NULL;

    json *monitor = json_object();
    json_set_str(monitor, "apiVersion", "monitoring.coreos.com/v1");
    json_set_str(monitor, "kind", "ServiceMonitor");
    json *meta = json_child(monitor, "metadata");
    json_set_str(meta, "name", kw_fmt("%s-monitor", name));
    json_set_str(meta, "namespace", ns);
    json *labels = json_child(meta, "labels");
    for (size_t i = 0; i < json_len(settings.labels); i++)
        json_set(labels, json_key_at(settings.labels, i), json_clone(json_value_at(settings.labels, i)));
    json_set_str(labels, "app.kubernetes.io/managed-by", "kubewasm");
    json_set_str(labels, "app", name);
    json *spec = json_child(monitor, "spec");
    json_set_str(json_child(json_child(spec, "selector"), "matchLabels"), "app", name);
    json *endpoint = json_object();
    json_set_str(endpoint, "port", settings.port);
    json_set_str(endpoint, "interval", settings.interval);
    json_set(spec, "endpoints", json_push(json_array(), endpoint));
    return monitor;
}

/* A ServiceMonitor for every live MongoDB; nothing on deletion. */
bool kw_plugin_handle(const kw_event *ev, kw_intents *out) {
    if (ev->type == KW_DELETED) return true;
    json *db = kw_event_object(ev);
    if (!db) return false;
    if (kw_is_being_deleted(db)) return true;
    json *monitor = service_monitor_for(db);
    if (!monitor) return false;
    const char *ns = kw_namespace(db), *name = kw_name(db);
    kw_info("monitoring MongoDB %s/%s with ServiceMonitor %j", ns ? ns : "", name ? name : "",
            json_pointer(monitor, "/metadata/name"));
    kw_create(out, monitor, KW_OWNED_BY_TRIGGER);
    return true;
}
