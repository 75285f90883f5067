/*
 * json.h: a small JSON library for kubewasm plugins in C (parser, tree, builder, writer).
 *
 * Memory: every value, key and string made here (and by kw_fmt in kubewasm.h) lives in one
 * arena. The kubewasm layer frees the whole arena after each describe/handle call, so plugin
 * code never frees anything. Outside the layer (native tests), call json_arena_reset().
 *
 * Semantics follow serde_json (what the Rust SDK uses), so C and Rust plugins agree:
 *   - RFC 8259 strictly: no trailing commas, no comments, no leading zeros, no NaN; control
 *     characters in strings are errors; lone UTF-16 surrogates in \u escapes are errors;
 *     nesting deeper than 127 arrays/objects is an error ("recursion limit exceeded").
 *   - numbers: an integer literal is an int (i64) or uint (u64) when it fits, else a float;
 *     a literal with a fraction or exponent is always a float. The literal text is kept and
 *     written back unchanged.
 *   - duplicate keys in an object: json_get returns the last one, and json_write writes only
 *     that one (as serde_json's map does);
 *     json_len/json_key_at/json_value_at still see every member, in document order.
 *
 * Strings are NUL-terminated UTF-8. A U+0000 inside a string ("\u0000") is held as the two
 * bytes C0 80 ("modified UTF-8", as Java does), so every string is a plain C string and
 * survives strcmp, kw_fmt and copies; json_write turns it back into \u0000, and the kubewasm
 * layer back into U+0000 when a string leaves the component.
 */
#ifndef KUBEWASM_JSON_H
#define KUBEWASM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

/* How a number literal is held (serde_json's N::PosInt / N::NegInt / N::Float). */
typedef enum {
    JSON_NUM_UINT,  /* a non-negative integer that fits u64 */
    JSON_NUM_INT,   /* a negative integer that fits i64 */
    JSON_NUM_FLOAT, /* anything else */
} json_num_kind;

typedef struct json json;

/* ---- memory ---- */

/* Allocates n bytes (8-aligned, zeroed) in the arena. Never returns NULL (traps when out of memory). */
void *json_alloc(size_t n);
/* Frees everything allocated in the arena. Every json pointer becomes invalid. */
void json_arena_reset(void);
/* Copies n bytes into the arena, adding a NUL. */
char *json_strndup(const char *s, size_t n);
char *json_strdup(const char *s);

/* ---- parsing ---- */

/* Parses one JSON document (surrounding whitespace allowed). On error returns NULL and, when
 * error is not NULL, sets *error to a message like serde_json's, e.g.
 * "expected value at line 1 column 1". */
json *json_parse(const char *text, size_t len, const char **error);

/* ---- inspecting ---- */

json_type json_typeof(const json *v); /* JSON_NULL for a NULL pointer */
bool json_is_null(const json *v);     /* true for JSON null, false for a NULL pointer */
bool json_is_bool(const json *v);
bool json_is_number(const json *v);
bool json_is_string(const json *v);
bool json_is_array(const json *v);
bool json_is_object(const json *v);

bool json_bool(const json *v); /* false unless a true boolean */

json_num_kind json_number_kind(const json *v);
/* true and *out when v is an integer in range (serde_json's as_i64 / as_u64). */
bool json_as_i64(const json *v, int64_t *out);
bool json_as_u64(const json *v, uint64_t *out);
/* true and *out when v is any number (as_f64). */
bool json_as_f64(const json *v, double *out);
/* The number as written (or as json_int/json_uint made it). */
const char *json_number_text(const json *v);

/* The string, or NULL when v is not a string. */
const char *json_string(const json *v);
size_t json_string_len(const json *v); /* in bytes, U+0000 counting 2 */
/* true when v is the string s (exact bytes). */
bool json_string_is(const json *v, const char *s);

/* Items of an array / members of an object (0 for anything else). */
size_t json_len(const json *v);
json *json_at(const json *array, size_t i);            /* NULL when out of range */
const char *json_key_at(const json *object, size_t i); /* member i's key, document order */
json *json_value_at(const json *object, size_t i);     /* member i's value */

/* The member named key (the last one when repeated), or NULL. NULL-safe. */
json *json_get(const json *object, const char *key);
/* RFC 6901 JSON pointer, e.g. "/metadata/name", "/spec/ports/0" ("~1" is '/', "~0" is '~').
 * "" is v itself. NULL when any step is missing. */
json *json_pointer(const json *v, const char *pointer);
/* The string at a pointer, or NULL when absent or not a string. */
const char *json_str_at(const json *v, const char *pointer);

/* Deep equality (objects: same key set, equal values, order ignored; numbers: by value). */
bool json_equal(const json *a, const json *b);

/* ---- building ---- */

json *json_null(void);
json *json_true(void);
json *json_false(void);
json *json_boolean(bool b);
json *json_int(int64_t i);
json *json_uint(uint64_t u);
json *json_str(const char *s);                /* copies s; NULL s gives JSON null */
json *json_strn(const char *s, size_t n);     /* copies n bytes (NUL bytes become C0 80) */
json *json_array(void);
json *json_object(void);

/* Appends to an array; returns the array. v NULL appends null. */
json *json_push(json *array, json *v);
/* Sets a member (replacing every member with that key); returns the object. v NULL sets null. */
json *json_set(json *object, const char *key, json *v);
/* Shorthands for json_set with a string / integer / boolean value. */
json *json_set_str(json *object, const char *key, const char *s);
json *json_set_int(json *object, const char *key, int64_t i);
json *json_set_bool(json *object, const char *key, bool b);
/* The member named key, created as an empty object when missing (or replaced when it is not
 * an object). */
json *json_child(json *object, const char *key);
/* Removes every member named key; true when one was there. */
bool json_remove(json *object, const char *key);
/* A deep copy. */
json *json_clone(const json *v);

/* ---- writing ---- */

/* A growable byte buffer in the arena (always NUL-terminated once anything was put). */
typedef struct {
    char *data;
    size_t len, cap;
} json_buf;
void json_buf_put(json_buf *b, const char *s, size_t n);
void json_buf_puts(json_buf *b, const char *s); /* NULL puts nothing */
void json_buf_putc(json_buf *b, char c);
void json_buf_put_i64(json_buf *b, int64_t i);
void json_buf_put_u64(json_buf *b, uint64_t u);
/* Appends n bytes of s as a JSON string literal (quotes, escapes). */
void json_buf_put_quoted(json_buf *b, const char *s, size_t n);
/* Appends v as compact JSON. */
void json_buf_put_json(json_buf *b, const json *v);
/* The text so far ("" when empty). */
const char *json_buf_str(json_buf *b);

/* Compact JSON text in the arena, NUL-terminated; *len (if not NULL) gets its length.
 * Escapes like serde_json: quote, backslash, control characters; nothing else. */
char *json_write(const json *v, size_t *len);

/* ---- locations (for error messages about parsed documents) ---- */

/* Offset just past a parsed value's text / a parsed member's key (its closing quote); 0 for
 * values built in code. */
size_t json_end_offset(const json *v);
size_t json_key_end_offset(const json *object, size_t i);
/* "line L column C" of the character before offset end in text, as serde_json reports
 * errors found after reading a token. */
char *json_location(const char *text, size_t len, size_t end);

#endif
