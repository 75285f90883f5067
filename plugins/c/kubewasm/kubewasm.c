/* kubewasm.c: the parts of kubewasm.h that do not touch the WIT bindings (glue.c does). */
#include "kubewasm.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

/* ================================================================ errors and formatting */

static char *error_message;
static bool error_retry;

bool kw_failed(void) { return error_message != NULL; }
const char *kw_error_message(void) { return error_message; }
bool kw_error_retry(void) { return error_retry; }

void kw_error_clear(void) {
    error_message = NULL;
    error_retry = false;
}

bool kw_streq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Rust's {:?} of a str: quotes, \" \\ \n \r \t \0, other control characters as \u{..}. */
static void put_debug_quoted(json_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    json_buf_putc(b, '"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '"': json_buf_puts(b, "\\\""); break;
        case '\\': json_buf_puts(b, "\\\\"); break;
        case '\n': json_buf_puts(b, "\\n"); break;
        case '\r': json_buf_puts(b, "\\r"); break;
        case '\t': json_buf_puts(b, "\\t"); break;
        default:
            if (c < 0x20 || c == 0x7f) {
                json_buf_puts(b, "\\u{");
                if (c >> 4) json_buf_putc(b, hex[c >> 4]);
                json_buf_putc(b, hex[c & 15]);
                json_buf_putc(b, '}');
            } else {
                json_buf_putc(b, (char)c);
            }
        }
    }
    json_buf_putc(b, '"');
}

static char *vfmt(const char *fmt, va_list ap) {
    json_buf b = {0};
    json_buf_put(&b, "", 0);
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            const char *q = p;
            while (*q && *q != '%') q++;
            json_buf_put(&b, p, (size_t)(q - p));
            p = q - 1;
            continue;
        }
        p++;
        int longs = 0;
        bool size = false, star = false;
        if (p[0] == '.' && p[1] == '*') {
            star = true;
            p += 2;
        }
        while (*p == 'l') {
            longs++;
            p++;
        }
        if (*p == 'z') {
            size = true;
            p++;
        }
        switch (*p) {
        case 's':
            if (star) {
                int n = va_arg(ap, int);
                const char *s = va_arg(ap, const char *);
                json_buf_put(&b, s ? s : "(null)", s ? (size_t)n : 6);
            } else {
                const char *s = va_arg(ap, const char *);
                json_buf_puts(&b, s ? s : "(null)");
            }
            break;
        case 'q': put_debug_quoted(&b, va_arg(ap, const char *)); break;
        case 'j': json_buf_put_json(&b, va_arg(ap, const json *)); break;
        case 'c': json_buf_putc(&b, (char)va_arg(ap, int)); break;
        case 'd':
        case 'i':
            if (size) json_buf_put_i64(&b, (int64_t)va_arg(ap, long));
            else if (longs >= 2) json_buf_put_i64(&b, va_arg(ap, long long));
            else if (longs == 1) json_buf_put_i64(&b, va_arg(ap, long));
            else json_buf_put_i64(&b, va_arg(ap, int));
            break;
        case 'u':
            if (size) json_buf_put_u64(&b, va_arg(ap, size_t));
            else if (longs >= 2) json_buf_put_u64(&b, va_arg(ap, unsigned long long));
            else if (longs == 1) json_buf_put_u64(&b, va_arg(ap, unsigned long));
            else json_buf_put_u64(&b, va_arg(ap, unsigned));
            break;
        case '%': json_buf_putc(&b, '%'); break;
        case 0: return b.data;
        default: json_buf_putc(&b, '%'); json_buf_putc(&b, *p); break;
        }
    }
    return b.data;
}

char *kw_fmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vfmt(fmt, ap);
    va_end(ap);
    return s;
}

bool kw_fail(const char *fmt, ...) {
    if (error_message) return false;
    va_list ap;
    va_start(ap, fmt);
    error_message = vfmt(fmt, ap);
    va_end(ap);
    error_retry = false;
    return false;
}

bool kw_fail_retry(const char *fmt, ...) {
    if (error_message) return false;
    va_list ap;
    va_start(ap, fmt);
    error_message = vfmt(fmt, ap);
    va_end(ap);
    error_retry = true;
    return false;
}

bool kw_fail_context(const char *context) {
    error_message = kw_fmt("%s: %s", context, error_message ? error_message : "error");
    error_retry = false;
    return false;
}

/* Declared in glue.c (or a native test stub). */
void kw__host_log(kw_level level, const char *message, size_t len);

void kw_log(kw_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vfmt(fmt, ap);
    va_end(ap);
    kw__host_log(level, s, strlen(s));
}

/* ================================================================ arena arrays */

static void *grow(void *items, size_t len, size_t *cap, size_t size) {
    if (len < *cap) return items;
    size_t n = *cap ? *cap * 2 : 4;
    void *p = json_alloc(n * size);
    if (len) memcpy(p, items, len * size);
    *cap = n;
    return p;
}

/* ================================================================ events */

static const kw_event *cached_event;
static json *cached_object;

json *kw_event_object(const kw_event *ev) {
    if (ev == cached_event && cached_object) return cached_object;
    const char *err = NULL;
    json *v = json_parse(ev->object, ev->object_len, &err);
    if (!v) {
        kw_fail("object is not valid JSON: %s", err);
        return NULL;
    }
    if (!json_is_object(v)) {
        kw_fail("object is not a JSON object");
        return NULL;
    }
    cached_event = ev;
    cached_object = v;
    return v;
}

void kw__reset_event_cache(void) {
    cached_event = NULL;
    cached_object = NULL;
}

bool kw_event_old_object(const kw_event *ev, json **out) {
    *out = NULL;
    if (!ev->old_object) return true;
    const char *err = NULL;
    json *v = json_parse(ev->old_object, ev->old_object_len, &err);
    if (!v) return kw_fail("old object is not valid JSON: %s", err);
    if (!json_is_object(v)) return kw_fail("old object is not a JSON object");
    *out = v;
    return true;
}

/* ================================================================ manifest */

void kw_manifest_set(kw_manifest *m, const char *name, const char *version) {
    m->name = name;
    m->version = version;
}

static kw_watch *add_watch(kw_manifest *m, const char *id) {
    size_t cap = m->n_watches; /* capacity tracked as the next power of two >= len */
    size_t c = 0;
    while (c < cap) c = c ? c * 2 : 4;
    m->watches = grow(m->watches, m->n_watches, &c, sizeof(kw_watch));
    kw_watch *w = &m->watches[m->n_watches++];
    memset(w, 0, sizeof *w);
    w->id = id;
    return w;
}

kw_watch *kw_watch_kind(kw_manifest *m, const char *id, const char *api_version, const char *kind) {
    kw_watch *w = add_watch(m, id);
    w->api_version = api_version;
    w->kind = kind;
    return w;
}

kw_watch *kw_watch_resource(kw_manifest *m, const char *id, const char *resource) {
    kw_watch *w = add_watch(m, id);
    w->resource = resource;
    return w;
}

/* Appends to a string list whose capacity is implied by its length (powers of two from 4). */
static void push_str(const char ***list, size_t *len, const char *s) {
    size_t c = 0;
    while (c < *len) c = c ? c * 2 : 4;
    *list = grow((void *)*list, *len, &c, sizeof(char *));
    (*list)[(*len)++] = s;
}

kw_grant *kw_grant_on(kw_manifest *m, const char *api_group, const char *kind, unsigned verbs) {
    size_t c = 0;
    while (c < m->n_grants) c = c ? c * 2 : 4;
    m->grants = grow(m->grants, m->n_grants, &c, sizeof(kw_grant));
    kw_grant *g = &m->grants[m->n_grants++];
    memset(g, 0, sizeof *g);
    push_str(&g->api_groups, &g->n_api_groups, api_group);
    push_str(&g->kinds, &g->n_kinds, kind);
    g->verbs = verbs;
    return g;
}

void kw_grant_group(kw_grant *g, const char *api_group) { push_str(&g->api_groups, &g->n_api_groups, api_group); }
void kw_grant_kind(kw_grant *g, const char *kind) { push_str(&g->kinds, &g->n_kinds, kind); }
void kw_grant_namespace(kw_grant *g, const char *ns) { push_str(&g->namespaces, &g->n_namespaces, ns); }

static kw_read *add_read(kw_manifest *m) {
    size_t c = 0;
    while (c < m->n_reads) c = c ? c * 2 : 4;
    m->reads = grow(m->reads, m->n_reads, &c, sizeof(kw_read));
    kw_read *r = &m->reads[m->n_reads++];
    memset(r, 0, sizeof *r);
    return r;
}

kw_read *kw_read_kind(kw_manifest *m, const char *api_version, const char *kind) {
    kw_read *r = add_read(m);
    r->api_version = api_version;
    r->kind = kind;
    return r;
}

kw_read *kw_read_resource(kw_manifest *m, const char *resource) {
    kw_read *r = add_read(m);
    r->resource = resource;
    return r;
}

void kw_watch_field(kw_watch *w, const char *path) { push_str(&w->fields, &w->n_fields, path); }
void kw_read_field(kw_read *r, const char *path) { push_str(&r->fields, &r->n_fields, path); }

bool kw_manifest_validate(const kw_manifest *m) {
    const char *name = m->name ? m->name : "";
    size_t n = strlen(name);
    bool ok = n > 0 && n <= 63;
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    }
    if (!ok) return kw_fail("plugin name %q must be 1-63 letters, digits or '-'", name);
    if (m->n_watches == 0) return kw_fail("plugin %s declares no watches", name);
    for (size_t i = 0; i < m->n_watches; i++) {
        const char *id = m->watches[i].id;
        if (!id || !*id) return kw_fail("a watch has an empty id");
        for (size_t j = 0; j < i; j++)
            if (kw_streq(m->watches[j].id, id)) return kw_fail("watch id %q is declared twice", id);
    }
    return true;
}

/* ================================================================ refs and intents */

kw_ref kw_ref_namespaced(const char *api_version, const char *kind, const char *ns, const char *name) {
    kw_ref r = {api_version, kind, ns, name};
    return r;
}

kw_ref kw_ref_cluster(const char *api_version, const char *kind, const char *name) {
    kw_ref r = {api_version, kind, NULL, name};
    return r;
}

bool kw_ref_of(const json *o, kw_ref *out) {
    out->api_version = kw_api_version(o);
    if (!out->api_version) return kw_fail("object has no apiVersion");
    out->kind = kw_kind(o);
    if (!out->kind) return kw_fail("object has no kind");
    out->ns = kw_namespace(o);
    out->name = kw_require_name(o);
    return out->name != NULL;
}

static kw_intent *add_intent(kw_intents *out, kw_intent_kind kind) {
    out->items = grow(out->items, out->len, &out->cap, sizeof(kw_intent));
    kw_intent *i = &out->items[out->len++];
    memset(i, 0, sizeof *i);
    i->kind = kind;
    return i;
}

void kw_create(kw_intents *out, const json *object, unsigned flags) {
    kw_intent *i = add_intent(out, KW_INTENT_CREATE);
    i->json = json_write(object, &i->json_len);
    i->flags = flags & (KW_OWNED_BY_TRIGGER | KW_FORCE);
}

static void patch(kw_intents *out, kw_ref target, const json *body, unsigned flags, bool merge) {
    kw_intent *i = add_intent(out, KW_INTENT_PATCH);
    i->json = json_write(body, &i->json_len);
    i->target = target;
    i->flags = flags & (KW_STATUS | KW_FORCE);
    i->merge = merge;
}

void kw_apply_patch(kw_intents *out, kw_ref target, const json *body, unsigned flags) {
    patch(out, target, body, flags, false);
}

void kw_merge_patch(kw_intents *out, kw_ref target, const json *body, unsigned flags) {
    patch(out, target, body, flags, true);
}

void kw_delete(kw_intents *out, kw_ref target, const char *uid, const char *resource_version,
               kw_propagation propagation) {
    kw_intent *i = add_intent(out, KW_INTENT_DELETE);
    i->target = target;
    i->uid = uid;
    i->resource_version = resource_version;
    i->propagation = propagation;
}

size_t kw_intents_len(const kw_intents *out) { return out->len; }

/* ================================================================ objects */

const char *kw_api_version(const json *o) { return json_string(json_get(o, "apiVersion")); }
const char *kw_kind(const json *o) { return json_string(json_get(o, "kind")); }
const char *kw_name(const json *o) { return json_str_at(o, "/metadata/name"); }
const char *kw_namespace(const json *o) { return json_str_at(o, "/metadata/namespace"); }
const char *kw_uid(const json *o) { return json_str_at(o, "/metadata/uid"); }
const char *kw_resource_version(const json *o) { return json_str_at(o, "/metadata/resourceVersion"); }

bool kw_generation(const json *o, int64_t *out) {
    return json_as_i64(json_pointer(o, "/metadata/generation"), out);
}

const char *kw_label(const json *o, const char *key) {
    return json_string(json_get(json_pointer(o, "/metadata/labels"), key));
}

const char *kw_annotation(const json *o, const char *key) {
    return json_string(json_get(json_pointer(o, "/metadata/annotations"), key));
}

bool kw_is_being_deleted(const json *o) {
    json *t = json_pointer(o, "/metadata/deletionTimestamp");
    return t && !json_is_null(t);
}

const char *kw_require_name(const json *o) {
    const char *n = kw_name(o);
    if (!n || !*n) {
        kw_fail("object has no metadata.name");
        return NULL;
    }
    return n;
}

const char *kw_api_group(const char *api_version) {
    const char *slash = api_version ? strrchr(api_version, '/') : NULL;
    return slash ? json_strndup(api_version, (size_t)(slash - api_version)) : "";
}

json *kw_owner_reference(const json *owner, bool controller) {
    const char *av = kw_api_version(owner), *kind = kw_kind(owner), *name = kw_name(owner),
               *uid = kw_uid(owner);
    if (!av) return kw_fail("owner has no apiVersion"), NULL;
    if (!kind) return kw_fail("owner has no kind"), NULL;
    if (!name) return kw_fail("owner has no metadata.name"), NULL;
    if (!uid) return kw_fail("owner has no metadata.uid"), NULL;
    json *r = json_object();
    json_set_str(r, "apiVersion", av);
    json_set_str(r, "kind", kind);
    json_set_str(r, "name", name);
    json_set_str(r, "uid", uid);
    if (controller) {
        json_set_bool(r, "controller", true);
        json_set_bool(r, "blockOwnerDeletion", true);
    }
    return r;
}

bool kw_add_owner_reference(json *object, const json *ref) {
    if (!json_is_object(object)) return kw_fail("not a JSON object");
    json *meta = json_get(object, "metadata");
    if (!meta) json_set(object, "metadata", meta = json_object());
    if (!json_is_object(meta)) return kw_fail("metadata is not an object");
    json *refs = json_get(meta, "ownerReferences");
    if (!refs) json_set(meta, "ownerReferences", refs = json_array());
    if (!json_is_array(refs)) return kw_fail("metadata.ownerReferences is not a list");
    const char *uid = json_string(json_get(ref, "uid"));
    json *kept = json_array();
    for (size_t i = 0; i < json_len(refs); i++) {
        json *r = json_at(refs, i);
        if (!kw_streq(json_string(json_get(r, "uid")), uid)) json_push(kept, r);
    }
    json_push(kept, json_clone(ref));
    json_set(meta, "ownerReferences", kept);
    return true;
}

bool kw_is_owned_by(const json *object, const char *owner_uid) {
    json *refs = json_pointer(object, "/metadata/ownerReferences");
    for (size_t i = 0; i < json_len(refs) && json_is_array(refs); i++)
        if (kw_streq(json_string(json_get(json_at(refs, i), "uid")), owner_uid)) return true;
    return false;
}

/* ================================================================ conditions and time */

json *kw_condition(const char *type, bool status) {
    json *c = json_object();
    json_set_str(c, "type", type);
    json_set_str(c, "status", status ? "True" : "False");
    return c;
}

json *kw_condition_unknown(const char *type) {
    json *c = kw_condition(type, false);
    json_set_str(c, "status", "Unknown");
    return c;
}

static json *set_or_remove(json *c, const char *key, const char *value) {
    if (value && *value) json_set_str(c, key, value);
    else json_remove(c, key);
    return c;
}

json *kw_condition_reason(json *c, const char *reason) { return set_or_remove(c, "reason", reason); }
json *kw_condition_message(json *c, const char *message) { return set_or_remove(c, "message", message); }

json *kw_condition_observed_generation_of(json *c, const json *object) {
    int64_t g;
    if (kw_generation(object, &g)) json_set_int(c, "observedGeneration", g);
    else json_remove(c, "observedGeneration");
    return c;
}

json *kw_condition_transitioned_from(json *c, const json *object) {
    const char *type = json_string(json_get(c, "type"));
    const char *status = json_string(json_get(c, "status"));
    json *conds = json_pointer(object, "/status/conditions");
    json *previous = NULL;
    for (size_t i = 0; json_is_array(conds) && i < json_len(conds); i++) {
        json *p = json_at(conds, i);
        if (kw_streq(json_string(json_get(p, "type")), type)) {
            previous = p;
            break;
        }
    }
    const char *time = NULL;
    if (previous && kw_streq(json_string(json_get(previous, "status")), status))
        time = json_string(json_get(previous, "lastTransitionTime"));
    json_set_str(c, "lastTransitionTime", time ? time : kw_now_rfc3339());
    return c;
}

char *kw_format_rfc3339(uint64_t unix_secs) {
    int64_t days = (int64_t)(unix_secs / 86400);
    uint64_t rem = unix_secs % 86400;
    /* Howard Hinnant's civil_from_days. */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t mo = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (mo <= 2);
    int64_t parts[6] = {y, mo, d, (int64_t)(rem / 3600), (int64_t)(rem % 3600 / 60), (int64_t)(rem % 60)};
    static const char seps[] = "--T::Z";
    json_buf b = {0};
    for (int i = 0; i < 6; i++) {
        int64_t v = parts[i];
        int width = i == 0 ? 4 : 2;
        char digits[24];
        int n = 0;
        do {
            digits[n++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (n < width) digits[n++] = '0';
        while (n) json_buf_putc(&b, digits[--n]);
        json_buf_putc(&b, seps[i]);
    }
    return b.data;
}

char *kw_now_rfc3339(void) {
    time_t t = time(NULL);
    return kw_format_rfc3339(t > 0 ? (uint64_t)t : 0);
}

/* ================================================================ decoding settings */

/* The settings text while kw_plugin_settings runs (set by glue.c): decode errors then end in
 * " at line L column C", as serde_json's do when the Rust SDK decodes the settings text. */
static const char *decode_src;
static size_t decode_len;

void kw__set_decode_source(const char *text, size_t len) {
    decode_src = text;
    decode_len = len;
}

static bool fail_at(size_t end, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vfmt(fmt, ap);
    va_end(ap);
    if (decode_src && end) return kw_fail("%s at %s", msg, json_location(decode_src, decode_len, end));
    return kw_fail("%s", msg);
}

const char *kw_unexpected(const json *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return json_bool(v) ? "boolean `true`" : "boolean `false`";
    case JSON_NUMBER:
        return kw_fmt(json_number_kind(v) == JSON_NUM_FLOAT ? "floating point `%s`" : "integer `%s`",
                      json_number_text(v));
    case JSON_STRING: return kw_fmt("string %q", json_string(v));
    case JSON_ARRAY: return "sequence";
    case JSON_OBJECT: return "map";
    }
    return "value";
}

bool kw_decode_struct(const json *v, const char *what, const char *const *fields, unsigned flags) {
    if (!v) return true;
    if (!json_is_object(v))
        return fail_at(json_end_offset(v), "invalid type: %s, expected %s", kw_unexpected(v), what);
    for (size_t i = 0; i < json_len(v); i++) {
        const char *key = json_key_at(v, i);
        bool known = false;
        for (const char *const *f = fields; f && *f && !known; f++) known = strcmp(*f, key) == 0;
        if (!known && (flags & KW_DENY_UNKNOWN)) {
            json_buf b = {0};
            json_buf_puts(&b, "unknown field `");
            json_buf_puts(&b, key);
            if (!fields || !*fields) {
                json_buf_puts(&b, "`, there are no fields");
            } else {
                json_buf_puts(&b, fields[1] ? "`, expected one of " : "`, expected ");
                for (const char *const *f = fields; *f; f++) {
                    if (f != fields) json_buf_puts(&b, ", ");
                    json_buf_putc(&b, '`');
                    json_buf_puts(&b, *f);
                    json_buf_putc(&b, '`');
                }
            }
            return fail_at(json_key_end_offset(v, i), "%s", b.data);
        }
        if (known && (flags & KW_DENY_DUPLICATES)) {
            for (size_t j = 0; j < i; j++)
                if (strcmp(json_key_at(v, j), key) == 0)
                    return fail_at(json_key_end_offset(v, i), "duplicate field `%s`", key);
        }
    }
    return true;
}

bool kw_decode_string(const json *obj, const char *key, bool nullable, const char **out) {
    json *v = json_get(obj, key);
    if (!v) return true;
    if (nullable && json_is_null(v)) {
        *out = NULL;
        return true;
    }
    if (!json_is_string(v))
        return fail_at(json_end_offset(v), "invalid type: %s, expected a string", kw_unexpected(v));
    *out = json_string(v);
    return true;
}

static bool decode_int(const json *obj, const char *key, bool nullable, int64_t lo, int64_t hi,
                       const char *ty, int64_t *out, bool *present) {
    if (present) *present = false;
    json *v = json_get(obj, key);
    if (!v || (nullable && json_is_null(v))) return true;
    if (!json_is_number(v) || json_number_kind(v) == JSON_NUM_FLOAT)
        return fail_at(json_end_offset(v), "invalid type: %s, expected %s", kw_unexpected(v), ty);
    int64_t i;
    if (!json_as_i64(v, &i) || i < lo || i > hi)
        return fail_at(json_end_offset(v), "invalid value: integer `%s`, expected %s", json_number_text(v), ty);
    *out = i;
    if (present) *present = true;
    return true;
}

bool kw_decode_u32(const json *obj, const char *key, bool nullable, uint32_t *out, bool *present) {
    int64_t i;
    bool had = false;
    if (!decode_int(obj, key, nullable, 0, UINT32_MAX, "u32", &i, &had)) return false;
    if (had) *out = (uint32_t)i;
    if (present) *present = had;
    return true;
}

bool kw_decode_i32(const json *obj, const char *key, bool nullable, int32_t *out, bool *present) {
    int64_t i;
    bool had = false;
    if (!decode_int(obj, key, nullable, INT32_MIN, INT32_MAX, "i32", &i, &had)) return false;
    if (had) *out = (int32_t)i;
    if (present) *present = had;
    return true;
}

bool kw_decode_string_map(const json *obj, const char *key, json **out) {
    json *v = json_get(obj, key);
    if (!v) return true;
    if (!json_is_object(v))
        return fail_at(json_end_offset(v), "invalid type: %s, expected a map", kw_unexpected(v));
    for (size_t i = 0; i < json_len(v); i++) {
        json *x = json_value_at(v, i);
        if (!json_is_string(x))
            return fail_at(json_end_offset(x), "invalid type: %s, expected a string", kw_unexpected(x));
    }
    *out = v;
    return true;
}
