/* json.c: see json.h. */
#include "json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *key;
    size_t key_len;
    size_t key_end; /* parsed: offset of the key's closing quote + 1 */
    json *value;
} json_member;

struct json {
    json_type type;
    bool boolean;
    json_num_kind num_kind;
    int64_t i;
    uint64_t u;
    double f;
    char *str; /* string value, or number text */
    size_t len; /* string length, or item / member count */
    size_t cap;
    json **items;
    json_member *members;
    size_t end; /* parsed: offset just past the value's text; 0 for built values */
};

/* ------------------------------------------------------------------ arena */

typedef struct chunk {
    struct chunk *next;
    size_t used, size;
    /* data follows, 8-aligned */
} chunk;

#define CHUNK_DATA(c) ((char *)(c) + ((sizeof(chunk) + 7) & ~(size_t)7))
#define CHUNK_MIN (64 * 1024)

static chunk *arena;

void *json_alloc(size_t n) {
    n = (n + 7) & ~(size_t)7;
    if (n == 0) n = 8;
    if (!arena || arena->size - arena->used < n) {
        size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
        chunk *c = malloc(((sizeof(chunk) + 7) & ~(size_t)7) + size);
        if (!c) __builtin_trap();
        c->size = size;
        c->used = 0;
        if (arena && size > CHUNK_MIN) {
            /* A big one-off block: keep the current chunk for small allocations. */
            c->next = arena->next;
            arena->next = c;
            c->used = n;
            memset(CHUNK_DATA(c), 0, n);
            return CHUNK_DATA(c);
        }
        c->next = arena;
        arena = c;
    }
    void *p = CHUNK_DATA(arena) + arena->used;
    arena->used += n;
    memset(p, 0, n);
    return p;
}

void json_arena_reset(void) {
    while (arena) {
        chunk *next = arena->next;
        free(arena);
        arena = next;
    }
}

char *json_strndup(const char *s, size_t n) {
    char *p = json_alloc(n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *json_strdup(const char *s) { return json_strndup(s, s ? strlen(s) : 0); }

static json *get_n(const json *o, const char *key, size_t n);
static void object_append_at(json *o, char *key, size_t key_len, json *v, size_t key_end);

/* ------------------------------------------------------------------ buffer */

void json_buf_put(json_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = json_alloc(cap);
        if (b->len) memcpy(d, b->data, b->len);
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void json_buf_puts(json_buf *b, const char *s) {
    if (s) json_buf_put(b, s, strlen(s));
}

void json_buf_putc(json_buf *b, char c) { json_buf_put(b, &c, 1); }

void json_buf_put_u64(json_buf *b, uint64_t u) {
    char tmp[24];
    int n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    json_buf_put(b, tmp + sizeof tmp - n, (size_t)n);
}

void json_buf_put_i64(json_buf *b, int64_t i) {
    if (i < 0) {
        json_buf_putc(b, '-');
        json_buf_put_u64(b, (uint64_t)0 - (uint64_t)i);
    } else {
        json_buf_put_u64(b, (uint64_t)i);
    }
}

void json_buf_put_quoted(json_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    json_buf_putc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[6];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c == 0xC0 && i + 1 < n && (unsigned char)s[i + 1] == 0x80) {
                /* U+0000, held as C0 80 (see json.h) */
                json_buf_put(b, s + start, i - start);
                json_buf_put(b, "\\u0000", 6);
                start = ++i + 1;
                continue;
            }
            if (c >= 0x20) continue;
            memcpy(u, "\\u00", 4);
            u[4] = hex[c >> 4];
            u[5] = hex[c & 15];
        }
        json_buf_put(b, s + start, i - start);
        if (esc)
            json_buf_puts(b, esc);
        else
            json_buf_put(b, u, 6);
        start = i + 1;
    }
    json_buf_put(b, s + start, n - start);
    json_buf_putc(b, '"');
}

void json_buf_put_json(json_buf *b, const json *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: json_buf_put(b, "null", 4); break;
    case JSON_BOOL: json_buf_puts(b, v->boolean ? "true" : "false"); break;
    case JSON_NUMBER: json_buf_puts(b, v->str); break;
    case JSON_STRING: json_buf_put_quoted(b, v->str, v->len); break;
    case JSON_ARRAY:
        json_buf_putc(b, '[');
        for (size_t i = 0; i < v->len; i++) {
            if (i) json_buf_putc(b, ',');
            json_buf_put_json(b, v->items[i]);
        }
        json_buf_putc(b, ']');
        break;
    case JSON_OBJECT:
        json_buf_putc(b, '{');
        for (size_t i = 0, first = 1; i < v->len; i++) {
            /* A repeated key is written once, with its last value (as serde_json would). */
            if (get_n(v, v->members[i].key, v->members[i].key_len) != v->members[i].value) continue;
            if (!first) json_buf_putc(b, ',');
            first = 0;
            json_buf_put_quoted(b, v->members[i].key, v->members[i].key_len);
            json_buf_putc(b, ':');
            json_buf_put_json(b, v->members[i].value);
        }
        json_buf_putc(b, '}');
        break;
    }
}

const char *json_buf_str(json_buf *b) { return b->data ? b->data : ""; }

char *json_write(const json *v, size_t *len) {
    json_buf b = {0};
    json_buf_put_json(&b, v);
    if (len) *len = b.len;
    return b.data;
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    const char *s;
    size_t n, pos;
    int depth; /* remaining nesting, as serde_json's recursion limit */
    const char *error;
} parser;

/* Records an error at the offending character p->pos (p->n at the end), located as
 * serde_json does: line, and column = 1-based index of that character in its line. */
static json *fail(parser *p, const char *msg) {
    if (!p->error) {
        size_t line = 1, col = 0, end = p->pos + 1 < p->n ? p->pos + 1 : p->n;
        for (size_t i = 0; i < end; i++) {
            if (p->s[i] == '\n') {
                line++;
                col = 0;
            } else {
                col++;
            }
        }
        json_buf b = {0};
        json_buf_puts(&b, msg);
        json_buf_puts(&b, " at line ");
        json_buf_put_u64(&b, line);
        json_buf_puts(&b, " column ");
        json_buf_put_u64(&b, col);
        p->error = b.data;
    }
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static json *new_value(json_type t) {
    json *v = json_alloc(sizeof *v);
    v->type = t;
    return v;
}

static json *parse_value(parser *p);

static int hex4(parser *p, unsigned *out) {
    unsigned v = 0;
    size_t start = p->pos;
    for (int i = 0; i < 4; i++) {
        if (p->pos >= p->n) {
            fail(p, "EOF while parsing a string");
            return 0;
        }
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else {
            /* serde_json reads all four characters first */
            p->pos = start + 3 < p->n ? start + 3 : p->n;
            fail(p, "invalid escape");
            return 0;
        }
    }
    *out = v;
    return 1;
}

static void put_utf8(json_buf *b, unsigned cp) {
    char t[4];
    size_t n;
    if (cp == 0) {
        json_buf_put(b, "\xC0\x80", 2); /* U+0000, held as C0 80 (see json.h) */
        return;
    }
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    json_buf_put(b, t, n);
}

/* Parses a string literal; p->pos is just after the opening quote. */
static int parse_string(parser *p, char **out, size_t *out_len) {
    size_t start = p->pos;
    /* Fast path: no escapes. */
    while (p->pos < p->n) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            *out = json_strndup(p->s + start, p->pos - start);
            *out_len = p->pos - start;
            p->pos++;
            return 1;
        }
        if (c == '\\') break;
        if (c < 0x20) {
            fail(p, "control character (\\u0000-\\u001F) found while parsing a string");
            return 0;
        }
        p->pos++;
    }
    json_buf b = {0};
    json_buf_put(&b, p->s + start, p->pos - start);
    while (p->pos < p->n) {
        unsigned char c = (unsigned char)p->s[p->pos++];
        if (c == '"') {
            *out = b.data ? b.data : json_strndup("", 0);
            *out_len = b.len;
            return 1;
        }
        if (c < 0x20) {
            p->pos--;
            fail(p, "control character (\\u0000-\\u001F) found while parsing a string");
            return 0;
        }
        if (c != '\\') {
            json_buf_putc(&b, (char)c);
            continue;
        }
        if (p->pos >= p->n) break;
        char e = p->s[p->pos++];
        switch (e) {
        case '"': json_buf_putc(&b, '"'); break;
        case '\\': json_buf_putc(&b, '\\'); break;
        case '/': json_buf_putc(&b, '/'); break;
        case 'b': json_buf_putc(&b, '\b'); break;
        case 'f': json_buf_putc(&b, '\f'); break;
        case 'n': json_buf_putc(&b, '\n'); break;
        case 'r': json_buf_putc(&b, '\r'); break;
        case 't': json_buf_putc(&b, '\t'); break;
        case 'u': {
            unsigned cp;
            if (!hex4(p, &cp)) return 0;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                p->pos--;
                fail(p, "lone leading surrogate in hex escape");
                return 0;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->pos + 1 >= p->n && (p->pos >= p->n || p->s[p->pos] == '\\')) {
                    p->pos = p->n;
                    fail(p, "EOF while parsing a string");
                    return 0;
                }
                if (p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    fail(p, "unexpected end of hex escape");
                    return 0;
                }
                p->pos += 2;
                if (!hex4(p, &lo)) return 0;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    p->pos--;
                    fail(p, "lone leading surrogate in hex escape");
                    return 0;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(&b, cp);
            break;
        }
        default:
            p->pos--;
            fail(p, "invalid escape");
            return 0;
        }
    }
    fail(p, "EOF while parsing a string");
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static json *parse_number(parser *p) {
    size_t start = p->pos;
    bool neg = false, is_float = false, overflow = false;
    uint64_t mag = 0;
    if (p->s[p->pos] == '-') {
        neg = true;
        p->pos++;
    }
    if (p->pos >= p->n) return fail(p, "EOF while parsing a value");
    if (!is_digit(p->s[p->pos])) return fail(p, "invalid number");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->n && is_digit(p->s[p->pos])) return fail(p, "invalid number");
    } else {
        while (p->pos < p->n && is_digit(p->s[p->pos])) {
            unsigned d = (unsigned)(p->s[p->pos++] - '0');
            if (mag > (UINT64_MAX - d) / 10) overflow = true;
            else mag = mag * 10 + d;
        }
    }
    if (p->pos < p->n && p->s[p->pos] == '.') {
        is_float = true;
        p->pos++;
        if (p->pos >= p->n) return fail(p, "EOF while parsing a value");
        if (!is_digit(p->s[p->pos])) return fail(p, "invalid number");
        while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        is_float = true;
        p->pos++;
        if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->n) return fail(p, "EOF while parsing a value");
        if (!is_digit(p->s[p->pos])) return fail(p, "invalid number");
        while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
    }
    json *v = new_value(JSON_NUMBER);
    v->str = json_strndup(p->s + start, p->pos - start);
    v->len = p->pos - start;
    if (!is_float && !overflow && !neg) {
        v->num_kind = JSON_NUM_UINT;
        v->u = mag;
        v->f = (double)mag;
    } else if (!is_float && !overflow && neg && mag != 0 && mag <= (uint64_t)1 << 63) {
        v->num_kind = JSON_NUM_INT;
        v->i = (int64_t)((uint64_t)0 - mag);
        v->f = (double)v->i;
    } else {
        v->num_kind = JSON_NUM_FLOAT;
        errno = 0;
        v->f = strtod(v->str, NULL);
        if (errno == ERANGE && (v->f > 1.0 || v->f < -1.0)) {
            p->pos--;
            return fail(p, "number out of range");
        }
    }
    return v;
}

static json *parse_literal(parser *p, const char *word, json *v) {
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++) {
        if (p->pos >= p->n) return fail(p, "EOF while parsing a value");
        if (p->s[p->pos] != word[i]) return fail(p, "expected ident");
        p->pos++;
    }
    return v;
}

static json *parse_array(parser *p) {
    json *a = json_array();
    p->pos++; /* '[' */
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
        return a;
    }
    if (p->pos >= p->n) return fail(p, "EOF while parsing a list");
    for (;;) {
        json *item = parse_value(p);
        if (!item) return NULL;
        json_push(a, item);
        skip_ws(p);
        if (p->pos >= p->n) return fail(p, "EOF while parsing a list");
        char c = p->s[p->pos++];
        if (c == ']') return a;
        if (c != ',') return p->pos--, fail(p, "expected `,` or `]`");
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ']') return fail(p, "trailing comma");
    }
}

static void object_append(json *o, char *key, size_t key_len, json *v) {
    object_append_at(o, key, key_len, v, 0);
}

static void object_append_at(json *o, char *key, size_t key_len, json *v, size_t key_end) {
    if (o->len == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        json_member *m = json_alloc(cap * sizeof *m);
        if (o->len) memcpy(m, o->members, o->len * sizeof *m);
        o->members = m;
        o->cap = cap;
    }
    o->members[o->len].key = key;
    o->members[o->len].key_len = key_len;
    o->members[o->len].value = v;
    o->members[o->len].key_end = key_end;
    o->len++;
}

static json *parse_object(parser *p) {
    json *o = json_object();
    p->pos++; /* '{' */
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
        return o;
    }
    for (;;) {
        if (p->pos >= p->n) return fail(p, "EOF while parsing an object");
        if (p->s[p->pos] != '"') return fail(p, p->s[p->pos] == '}' ? "trailing comma" : "key must be a string");
        p->pos++;
        char *key;
        size_t key_len;
        if (!parse_string(p, &key, &key_len)) return NULL;
        size_t key_end = p->pos;
        skip_ws(p);
        if (p->pos >= p->n) return fail(p, "EOF while parsing an object");
        if (p->s[p->pos] != ':') return fail(p, "expected `:`");
        p->pos++;
        json *v = parse_value(p);
        if (!v) return NULL;
        object_append_at(o, key, key_len, v, key_end);
        skip_ws(p);
        if (p->pos >= p->n) return fail(p, "EOF while parsing an object");
        char c = p->s[p->pos++];
        if (c == '}') return o;
        if (c != ',') return p->pos--, fail(p, "expected `,` or `}`");
        skip_ws(p);
        if (p->pos >= p->n) return fail(p, "EOF while parsing a value");
    }
}

static json *parse_value_inner(parser *p);

static json *parse_value(parser *p) {
    json *v = parse_value_inner(p);
    if (v) v->end = p->pos;
    return v;
}

static json *parse_value_inner(parser *p) {
    skip_ws(p);
    if (p->pos >= p->n) return fail(p, "EOF while parsing a value");
    char c = p->s[p->pos];
    switch (c) {
    case 'n': return parse_literal(p, "null", new_value(JSON_NULL));
    case 't': return parse_literal(p, "true", json_true());
    case 'f': return parse_literal(p, "false", json_false());
    case '"': {
        json *v = new_value(JSON_STRING);
        p->pos++;
        return parse_string(p, &v->str, &v->len) ? v : NULL;
    }
    case '[':
    case '{': {
        if (--p->depth == 0) return fail(p, "recursion limit exceeded");
        json *v = c == '[' ? parse_array(p) : parse_object(p);
        p->depth++;
        return v;
    }
    default:
        if (c == '-' || is_digit(c)) return parse_number(p);
        return fail(p, "expected value");
    }
}

json *json_parse(const char *text, size_t len, const char **error) {
    parser p = {text, len, 0, 128, NULL};
    json *v = text ? parse_value(&p) : fail(&p, "EOF while parsing a value");
    if (v) {
        skip_ws(&p);
        if (p.pos < p.n) {
            v = fail(&p, "trailing characters");
        }
    }
    if (!v && error) *error = p.error;
    return v;
}

/* ------------------------------------------------------------------ inspecting */

json_type json_typeof(const json *v) { return v ? v->type : JSON_NULL; }
bool json_is_null(const json *v) { return v && v->type == JSON_NULL; }
bool json_is_bool(const json *v) { return v && v->type == JSON_BOOL; }
bool json_is_number(const json *v) { return v && v->type == JSON_NUMBER; }
bool json_is_string(const json *v) { return v && v->type == JSON_STRING; }
bool json_is_array(const json *v) { return v && v->type == JSON_ARRAY; }
bool json_is_object(const json *v) { return v && v->type == JSON_OBJECT; }
bool json_bool(const json *v) { return json_is_bool(v) && v->boolean; }

json_num_kind json_number_kind(const json *v) {
    return json_is_number(v) ? v->num_kind : JSON_NUM_FLOAT;
}

bool json_as_i64(const json *v, int64_t *out) {
    if (!json_is_number(v)) return false;
    if (v->num_kind == JSON_NUM_INT) {
        *out = v->i;
        return true;
    }
    if (v->num_kind == JSON_NUM_UINT && v->u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)v->u;
        return true;
    }
    return false;
}

bool json_as_u64(const json *v, uint64_t *out) {
    if (!json_is_number(v) || v->num_kind != JSON_NUM_UINT) return false;
    *out = v->u;
    return true;
}

bool json_as_f64(const json *v, double *out) {
    if (!json_is_number(v)) return false;
    *out = v->f;
    return true;
}

const char *json_number_text(const json *v) { return json_is_number(v) ? v->str : NULL; }

const char *json_string(const json *v) { return json_is_string(v) ? v->str : NULL; }
size_t json_string_len(const json *v) { return json_is_string(v) ? v->len : 0; }

bool json_string_is(const json *v, const char *s) {
    if (!json_is_string(v) || !s) return false;
    size_t n = strlen(s);
    return v->len == n && memcmp(v->str, s, n) == 0;
}

size_t json_len(const json *v) {
    return (json_is_array(v) || json_is_object(v)) ? v->len : 0;
}

json *json_at(const json *a, size_t i) {
    return json_is_array(a) && i < a->len ? a->items[i] : NULL;
}

const char *json_key_at(const json *o, size_t i) {
    return json_is_object(o) && i < o->len ? o->members[i].key : NULL;
}

json *json_value_at(const json *o, size_t i) {
    return json_is_object(o) && i < o->len ? o->members[i].value : NULL;
}

static json *get_n(const json *o, const char *key, size_t n) {
    if (!json_is_object(o)) return NULL;
    for (size_t i = o->len; i-- > 0;) {
        if (o->members[i].key_len == n && memcmp(o->members[i].key, key, n) == 0)
            return o->members[i].value;
    }
    return NULL;
}

json *json_get(const json *o, const char *key) { return key ? get_n(o, key, strlen(key)) : NULL; }

json *json_pointer(const json *v, const char *ptr) {
    if (!ptr) return NULL;
    if (*ptr == 0) return (json *)v;
    if (*ptr != '/') return NULL;
    json_buf tok = {0};
    while (v && *ptr == '/') {
        ptr++;
        tok.len = 0;
        json_buf_put(&tok, "", 0);
        while (*ptr && *ptr != '/') {
            if (ptr[0] == '~' && ptr[1] == '0') {
                json_buf_putc(&tok, '~');
                ptr += 2;
            } else if (ptr[0] == '~' && ptr[1] == '1') {
                json_buf_putc(&tok, '/');
                ptr += 2;
            } else {
                json_buf_putc(&tok, *ptr++);
            }
        }
        if (json_is_object(v)) {
            v = get_n(v, tok.data, tok.len);
        } else if (json_is_array(v)) {
            /* An index: digits, no leading zero (as serde_json). */
            size_t idx = 0;
            if (tok.len == 0 || (tok.len > 1 && tok.data[0] == '0')) return NULL;
            for (size_t i = 0; i < tok.len; i++) {
                if (!is_digit(tok.data[i])) return NULL;
                idx = idx * 10 + (size_t)(tok.data[i] - '0');
            }
            v = json_at(v, idx);
        } else {
            return NULL;
        }
    }
    return (json *)v;
}

const char *json_str_at(const json *v, const char *ptr) { return json_string(json_pointer(v, ptr)); }

bool json_equal(const json *a, const json *b) {
    if (json_typeof(a) != json_typeof(b)) return false;
    switch (json_typeof(a)) {
    case JSON_NULL: return true;
    case JSON_BOOL: return a->boolean == b->boolean;
    case JSON_NUMBER:
        if (a->num_kind != b->num_kind) return false;
        if (a->num_kind == JSON_NUM_UINT) return a->u == b->u;
        if (a->num_kind == JSON_NUM_INT) return a->i == b->i;
        return a->f == b->f;
    case JSON_STRING: return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case JSON_ARRAY:
        if (a->len != b->len) return false;
        for (size_t i = 0; i < a->len; i++)
            if (!json_equal(a->items[i], b->items[i])) return false;
        return true;
    case JSON_OBJECT: {
        /* Compare as maps: the last value of each key counts. */
        size_t distinct_a = 0, distinct_b = 0;
        for (size_t i = 0; i < a->len; i++) {
            const json_member *m = &a->members[i];
            if (get_n(a, m->key, m->key_len) != m->value) continue; /* an earlier duplicate */
            distinct_a++;
            json *other = get_n(b, m->key, m->key_len);
            if (!other || !json_equal(m->value, other)) return false;
        }
        for (size_t i = 0; i < b->len; i++) {
            const json_member *m = &b->members[i];
            if (get_n(b, m->key, m->key_len) == m->value) distinct_b++;
        }
        return distinct_a == distinct_b;
    }
    }
    return false;
}

/* ------------------------------------------------------------------ building */

json *json_null(void) { return new_value(JSON_NULL); }

json *json_boolean(bool b) {
    json *v = new_value(JSON_BOOL);
    v->boolean = b;
    return v;
}

json *json_true(void) { return json_boolean(true); }
json *json_false(void) { return json_boolean(false); }

json *json_int(int64_t i) {
    if (i >= 0) return json_uint((uint64_t)i);
    json *v = new_value(JSON_NUMBER);
    json_buf b = {0};
    json_buf_put_i64(&b, i);
    v->num_kind = JSON_NUM_INT;
    v->i = i;
    v->f = (double)i;
    v->str = b.data;
    v->len = b.len;
    return v;
}

json *json_uint(uint64_t u) {
    json *v = new_value(JSON_NUMBER);
    json_buf b = {0};
    json_buf_put_u64(&b, u);
    v->num_kind = JSON_NUM_UINT;
    v->u = u;
    v->f = (double)u;
    v->str = b.data;
    v->len = b.len;
    return v;
}

json *json_strn(const char *s, size_t n) {
    json *v = new_value(JSON_STRING);
    if (memchr(s, 0, n)) {
        json_buf b = {0};
        json_buf_put(&b, "", 0);
        for (size_t i = 0; i < n; i++) {
            if (s[i]) json_buf_putc(&b, s[i]);
            else json_buf_put(&b, "\xC0\x80", 2);
        }
        v->str = b.data;
        v->len = b.len;
    } else {
        v->str = json_strndup(s, n);
        v->len = n;
    }
    return v;
}

json *json_str(const char *s) { return s ? json_strn(s, strlen(s)) : json_null(); }
json *json_array(void) { return new_value(JSON_ARRAY); }
json *json_object(void) { return new_value(JSON_OBJECT); }

json *json_push(json *a, json *v) {
    if (!json_is_array(a)) return a;
    if (a->len == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4;
        json **items = json_alloc(cap * sizeof *items);
        if (a->len) memcpy(items, a->items, a->len * sizeof *items);
        a->items = items;
        a->cap = cap;
    }
    a->items[a->len++] = v ? v : json_null();
    return a;
}

json *json_set(json *o, const char *key, json *v) {
    if (!json_is_object(o) || !key) return o;
    size_t n = strlen(key);
    if (!v) v = json_null();
    bool done = false;
    size_t w = 0;
    for (size_t i = 0; i < o->len; i++) {
        json_member m = o->members[i];
        if (m.key_len == n && memcmp(m.key, key, n) == 0) {
            if (done) continue; /* drop later duplicates */
            m.value = v;
            done = true;
        }
        o->members[w++] = m;
    }
    o->len = w;
    if (!done) object_append(o, json_strndup(key, n), n, v);
    return o;
}

json *json_set_str(json *o, const char *key, const char *s) { return json_set(o, key, json_str(s)); }
json *json_set_int(json *o, const char *key, int64_t i) { return json_set(o, key, json_int(i)); }
json *json_set_bool(json *o, const char *key, bool b) { return json_set(o, key, json_boolean(b)); }

json *json_child(json *o, const char *key) {
    json *c = json_get(o, key);
    if (!json_is_object(c)) {
        c = json_object();
        json_set(o, key, c);
    }
    return c;
}

bool json_remove(json *o, const char *key) {
    if (!json_is_object(o) || !key) return false;
    size_t n = strlen(key), w = 0;
    bool found = false;
    for (size_t i = 0; i < o->len; i++) {
        if (o->members[i].key_len == n && memcmp(o->members[i].key, key, n) == 0) {
            found = true;
            continue;
        }
        o->members[w++] = o->members[i];
    }
    o->len = w;
    return found;
}

json *json_clone(const json *v) {
    if (!v) return NULL;
    json *c = new_value(v->type);
    *c = *v;
    c->cap = 0;
    c->items = NULL;
    c->members = NULL;
    if (v->type == JSON_STRING || v->type == JSON_NUMBER) {
        c->str = json_strndup(v->str, v->type == JSON_STRING ? v->len : strlen(v->str));
    } else if (v->type == JSON_ARRAY) {
        c->len = 0;
        for (size_t i = 0; i < v->len; i++) json_push(c, json_clone(v->items[i]));
    } else if (v->type == JSON_OBJECT) {
        c->len = 0;
        for (size_t i = 0; i < v->len; i++)
            object_append(c, json_strndup(v->members[i].key, v->members[i].key_len),
                          v->members[i].key_len, json_clone(v->members[i].value));
    }
    return c;
}

/* ------------------------------------------------------------------ locations */

size_t json_end_offset(const json *v) { return v ? v->end : 0; }

size_t json_key_end_offset(const json *o, size_t i) {
    return json_is_object(o) && i < o->len ? o->members[i].key_end : 0;
}

char *json_location(const char *text, size_t len, size_t end) {
    size_t line = 1, col = 0;
    for (size_t i = 0; i < end && i < len; i++) {
        if (text[i] == '\n') {
            line++;
            col = 0;
        } else {
            col++;
        }
    }
    json_buf b = {0};
    json_buf_puts(&b, "line ");
    json_buf_put_u64(&b, line);
    json_buf_puts(&b, " column ");
    json_buf_put_u64(&b, col);
    return b.data;
}
