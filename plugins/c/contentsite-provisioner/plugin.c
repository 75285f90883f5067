/*
 * contentsite-provisioner, in C. The same plugin as plugins/rust/contentsite-provisioner (Rust):
 * same manifest, settings and intents.
 *
 * Provision on demand: for every ContentSite (sites.kubewasm.dev/v1alpha1) that is added,
 * modified or resynced (and not being deleted), ask for
 *   1. a MongoDB (mongodb.com/v1) named <site>-db in the site's namespace, its spec from the
 *      site's spec.database with defaults from the settings,
 *   2. a Service named <site> selecting app: <site>, port 80 -> 8080,
 *   3. the site's status (status subresource, server-side apply): databaseRef, serviceRef,
 *      observedGeneration and a Provisioned condition.
 * Both children are owned by the site, so a deleted event needs no intents.
 */
#include <string.h>
#include "kubewasm.h"

#define NAME "contentsite-provisioner"
#define VERSION "0.1.0"
#define WATCH_ID "sites"
#define SITE_API_VERSION "sites.kubewasm.dev/v1alpha1"
#define SITE_KIND "ContentSite"

/* Settings (contentsite-provisioner.yaml); every field is optional. */
static struct {
    const char *namespace; /* only watch (and write in) this namespace; NULL: all */
    const char *db_type;   /* database.type */
    uint32_t db_members;   /* database.members */
    const char *db_version;
    const char *db_credentials;  /* database.credentials: the operator's API-key Secret */
    const char *db_project;      /* database.projectConfigMap */
    const char *db_manager;      /* database.manager: opsManager or cloudManager */
    int32_t port;          /* service.port */
    int32_t target_port;   /* service.targetPort */
} settings;

bool kw_plugin_settings(const json *s) {
    settings.namespace = NULL;
    settings.db_type = "ReplicaSet";
    settings.db_members = 3;
    settings.db_version = "7.0.12";
    settings.db_credentials = "mongodb-credentials";
    settings.db_project = "mongodb-project";
    settings.db_manager = "opsManager";
    settings.port = 80;
    settings.target_port = 8080;
    if (!s) return true;

    static const char *const top[] = {"namespace", "database", "service", NULL};
    static const char *const database[] = {"type",        "members",          "version",
                                           "credentials", "projectConfigMap", "manager",
                                           NULL};
    static const char *const service[] = {"port", "targetPort", NULL};
    const unsigned strict = KW_DENY_UNKNOWN | KW_DENY_DUPLICATES;
    json *db = json_get(s, "database"), *svc = json_get(s, "service");
    return kw_decode_struct(s, "struct Settings", top, strict) &&
           kw_decode_string(s, "namespace", true, &settings.namespace) &&
           kw_decode_struct(db, "struct DatabaseDefaults", database, strict) &&
           kw_decode_string(db, "type", false, &settings.db_type) &&
           kw_decode_u32(db, "members", false, &settings.db_members, NULL) &&
           kw_decode_string(db, "version", false, &settings.db_version) &&
           kw_decode_string(db, "credentials", false, &settings.db_credentials) &&
           kw_decode_string(db, "projectConfigMap", false, &settings.db_project) &&
           kw_decode_string(db, "manager", false, &settings.db_manager) &&
           (strcmp(settings.db_manager, "opsManager") == 0 ||
            strcmp(settings.db_manager, "cloudManager") == 0 ||
            kw_fail("database.manager must be one of opsManager, cloudManager, not \"%s\"",
                    settings.db_manager)) &&
           kw_decode_struct(svc, "struct ServiceSettings", service, strict) &&
           kw_decode_i32(svc, "port", false, &settings.port, NULL) &&
           kw_decode_i32(svc, "targetPort", false, &settings.target_port, NULL);
}

/* Watch ContentSites; create MongoDBs and Services; patch ContentSite status. */
bool kw_plugin_describe(kw_manifest *m) {
    kw_manifest_set(m, NAME, VERSION);
    kw_watch *w = kw_watch_kind(m, WATCH_ID, SITE_API_VERSION, SITE_KIND);
    kw_grant *grants[] = {
        kw_grant_on(m, "mongodb.com", "MongoDB", KW_VERB_CREATE),
        kw_grant_on(m, "", "Service", KW_VERB_CREATE),
        kw_grant_on(m, "sites.kubewasm.dev", SITE_KIND, KW_VERB_PATCH_STATUS),
    };
    if (settings.namespace) {
        w->ns = settings.namespace;
        for (size_t i = 0; i < sizeof grants / sizeof grants[0]; i++)
            kw_grant_namespace(grants[i], settings.namespace);
    }
    return true;
}

/* The intents for one live ContentSite: its MongoDB, its Service, its status. */
static bool provision(const json *site, kw_intents *out) {
    const char *av = kw_api_version(site), *kind = kw_kind(site);
    if (!kw_streq(av, SITE_API_VERSION) || !kw_streq(kind, SITE_KIND))
        return kw_fail("expected a " SITE_API_VERSION " " SITE_KIND ", got %s %s", av ? av : "?",
                       kind ? kind : "?");
    const char *name = kw_require_name(site);
    if (!name) return false;
    const char *ns = kw_namespace(site);
    if (!ns) return kw_fail("ContentSite has no metadata.namespace");

    /* spec.database: every field optional (unknown fields ignored), defaults from settings. */
    const char *db_type = NULL, *db_version = NULL;
    uint32_t members = settings.db_members;
    json *spec_db = json_pointer(site, "/spec/database");
    if (json_is_null(spec_db)) spec_db = NULL;
    static const char *const db_fields[] = {"type", "members", "version", NULL};
    if (!kw_decode_struct(spec_db, "struct DatabaseSpec", db_fields, 0) ||
        !kw_decode_string(spec_db, "type", true, &db_type) ||
        !kw_decode_u32(spec_db, "members", true, &members, NULL) ||
        !kw_decode_string(spec_db, "version", true, &db_version))
        return kw_fail_context("invalid spec.database");
    if (members == 0) return kw_fail("spec.database.members must be at least 1");
    const char *db_name = kw_fmt("%s-db", name);

    json *database = json_object();
    json_set_str(database, "apiVersion", "mongodb.com/v1");
    json_set_str(database, "kind", "MongoDB");
    json *meta = json_child(database, "metadata");
    json_set_str(meta, "name", db_name);
    json_set_str(meta, "namespace", ns);
    json *labels = json_child(meta, "labels");
    json_set_str(labels, "app.kubernetes.io/managed-by", "kubewasm");
    json_set_str(labels, "app.kubernetes.io/part-of", name);
    json *spec = json_child(database, "spec");
    json_set_str(spec, "type", db_type ? db_type : settings.db_type);
    json_set_int(spec, "members", members);
    json_set_str(spec, "version", db_version ? db_version : settings.db_version);
    json_set_str(spec, "credentials", settings.db_credentials);
    json_set_str(json_child(json_child(spec, settings.db_manager), "configMapRef"), "name",
                 settings.db_project);

    json *service = json_object();
    json_set_str(service, "apiVersion", "v1");
    json_set_str(service, "kind", "Service");
    meta = json_child(service, "metadata");
    json_set_str(meta, "name", name);
    json_set_str(meta, "namespace", ns);
    labels = json_child(meta, "labels");
    json_set_str(labels, "app", name);
    json_set_str(labels, "app.kubernetes.io/managed-by", "kubewasm");
    spec = json_child(service, "spec");
    json_set_str(json_child(spec, "selector"), "app", name);
    json *port = json_object();
    json_set_str(port, "name", "http");
    json_set_str(port, "protocol", "TCP");
    json_set_int(port, "port", settings.port);
    json_set_int(port, "targetPort", settings.target_port);
    json_set(spec, "ports", json_push(json_array(), port));

    json *condition = kw_condition("Provisioned", true);
    kw_condition_reason(condition, "ChildrenRequested");
    kw_condition_message(condition, kw_fmt("MongoDB %s and Service %s requested", db_name, name));
    kw_condition_observed_generation_of(condition, site);
    kw_condition_transitioned_from(condition, site);
    json *status = json_object();
    json_set_str(status, "databaseRef", db_name);
    json_set_str(status, "serviceRef", name);
    json_set(status, "conditions", json_push(json_array(), condition));
    int64_t generation;
    if (kw_generation(site, &generation)) json_set_int(status, "observedGeneration", generation);
    json *status_patch = json_object();
    json_set_str(status_patch, "apiVersion", SITE_API_VERSION);
    json_set_str(status_patch, "kind", SITE_KIND);
    meta = json_child(status_patch, "metadata");
    json_set_str(meta, "name", name);
    json_set_str(meta, "namespace", ns);
    json_set(status_patch, "status", status);

    kw_ref target;
    if (!kw_ref_of(site, &target)) return false;
    kw_info("provisioning %s/%s: MongoDB %s, Service %s", ns, name, db_name, name);
    kw_create(out, database, KW_OWNED_BY_TRIGGER);
    kw_create(out, service, KW_OWNED_BY_TRIGGER);
    kw_apply_patch(out, target, status_patch, KW_STATUS);
    return true;
}

/* Provisions on added/modified/resync; nothing on deleted or while the site is being deleted. */
bool kw_plugin_handle(const kw_event *ev, kw_intents *out) {
    if (ev->type == KW_DELETED) return true; /* ownerReferences let the GC remove the children */
    json *site = kw_event_object(ev);
    if (!site) return false;
    if (kw_is_being_deleted(site)) {
        const char *name = kw_name(site);
        kw_debug("%s is being deleted; nothing to do", name ? name : "?");
        return true;
    }
    return provision(site, out);
}
