// @ts-check
/**
 * Small decoders for settings and for the parts of objects a plugin reads.
 *
 * They do what the Rust SDK's serde structs do, with the same error wording, so a JS
 * plugin rejects the same input with (nearly) the same message as its Rust twin:
 *
 * ```js
 * const Settings = t.object({
 *   namespace: t.optional(t.string()),
 *   members: t.u32().default(3),
 * }, { name: 'Settings', strict: true });   // strict: unknown fields are errors
 * Settings.decode(undefined)          // → { namespace: undefined, members: 3 }
 * Settings.decode({ members: -1 })    // throws DecodeError "invalid value: integer `-1`, expected u32"
 * ```
 *
 * A missing field takes the field's default (`.default(v)`), `undefined` for `t.optional`,
 * and the decoded `{}` for a `t.object` whose fields all have defaults; otherwise it is
 * a "missing field" error. An explicit `null` is only accepted by `t.optional` (like serde).
 */

/** A decoding failure; `message` follows serde's wording. */
export class DecodeError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'DecodeError';
  }
}

/**
 * @template T
 * @typedef {object} Type
 * @property {(value: unknown) => T} decode   Decodes a JSON value (throws DecodeError).
 * @property {string} expected                 What serde would say it expected.
 * @property {boolean} hasDefault              Whether a missing field can be filled in.
 * @property {() => T} makeDefault             The value of a missing field.
 * @property {(value: T) => Type<T>} default   A copy of this type with a default.
 */

/**
 * How serde names an unexpected JSON value.
 * @param {unknown} v
 */
export function describeValue(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  if (typeof v === 'number') {
    return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  }
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  if (Array.isArray(v)) return 'sequence';
  return 'map';
}

/**
 * @param {unknown} v
 * @param {string} expected
 */
function invalidType(v, expected) {
  return new DecodeError(`invalid type: ${describeValue(v)}, expected ${expected}`);
}

/**
 * @template T
 * @param {string} expected
 * @param {(value: unknown) => T} decode
 * @param {{ has: boolean, make?: () => T }} [dflt]
 * @returns {Type<T>}
 */
function makeType(expected, decode, dflt = { has: false }) {
  return {
    expected,
    decode,
    hasDefault: dflt.has,
    makeDefault() {
      if (!dflt.make) throw new DecodeError(`no default for ${expected}`);
      return dflt.make();
    },
    default(value) {
      return makeType(expected, decode, { has: true, make: () => structuredCloneJson(value) });
    },
  };
}

/**
 * @template T
 * @param {T} v
 * @returns {T}
 */
function structuredCloneJson(v) {
  // Strings, numbers, booleans and null are immutable: only objects and arrays need a copy.
  return typeof v !== 'object' || v === null ? v : JSON.parse(JSON.stringify(v));
}

/**
 * @param {string} name
 * @param {number} min
 * @param {number} max
 */
function integer(name, min, max) {
  return makeType(name, (v) => {
    if (typeof v !== 'number') throw invalidType(v, name);
    if (!Number.isInteger(v)) throw invalidType(v, name);
    if (v < min || v > max) throw new DecodeError(`invalid value: integer \`${v}\`, expected ${name}`);
    return v;
  });
}

/**
 * @param {readonly string[]} names
 */
function expectedFields(names) {
  const q = names.map((n) => `\`${n}\``);
  if (q.length === 0) return 'there are no fields';
  if (q.length === 1) return `expected ${q[0]}`;
  if (q.length === 2) return `expected ${q[0]} or ${q[1]}`;
  return `expected one of ${q.join(', ')}`;
}

/** @type {(this: unknown, key: PropertyKey) => boolean} */
const hasOwn = Object.prototype.hasOwnProperty;

/** @param {unknown} v */
function isPlainObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const t = {
  /** A JSON string (serde `String`). @returns {Type<string>} */
  string: () =>
    makeType('a string', (v) => {
      if (typeof v !== 'string') throw invalidType(v, 'a string');
      return v;
    }),

  /** A JSON boolean (serde `bool`). @returns {Type<boolean>} */
  bool: () =>
    makeType('a boolean', (v) => {
      if (typeof v !== 'boolean') throw invalidType(v, 'a boolean');
      return v;
    }),

  /** An integer in 0..=4294967295 (serde `u32`). @returns {Type<number>} */
  u32: () => integer('u32', 0, 4294967295),

  /** An integer in -2^31..2^31-1 (serde `i32`). @returns {Type<number>} */
  i32: () => integer('i32', -2147483648, 2147483647),

  /** A safe integer (serde `i64`, within JS's exact range). @returns {Type<number>} */
  i64: () => integer('i64', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),

  /** Any JSON value, unchecked (serde `Value`). @returns {Type<any>} */
  any: () => makeType('any value', (v) => v, { has: true, make: () => undefined }),

  /**
   * `null` or missing → `undefined`; otherwise `inner` (serde `Option<T>`).
   * @template T
   * @param {Type<T>} inner
   * @returns {Type<T | undefined>}
   */
  optional: (inner) =>
    makeType(
      `option`,
      (v) => (v === null || v === undefined ? undefined : inner.decode(v)),
      { has: true, make: () => undefined },
    ),

  /**
   * A JSON array of `item` (serde `Vec<T>`).
   * @template T
   * @param {Type<T>} item
   * @returns {Type<T[]>}
   */
  array: (item) =>
    makeType('a sequence', (v) => {
      if (!Array.isArray(v)) throw invalidType(v, 'a sequence');
      return v.map((x) => item.decode(x));
    }),

  /**
   * A JSON object with any keys and `value` values (serde `BTreeMap<String, T>`).
   * @template T
   * @param {Type<T>} value
   * @returns {Type<Record<string, T>>}
   */
  map: (value) =>
    makeType('a map', (v) => {
      if (!isPlainObject(v)) throw invalidType(v, 'a map');
      /** @type {Record<string, T>} */
      const out = {};
      for (const [k, x] of Object.entries(/** @type {object} */ (v))) out[k] = value.decode(x);
      return out;
    }),

  /**
   * A JSON object with known fields (a serde struct). Missing fields take their defaults;
   * with `strict`, unknown fields are errors (`deny_unknown_fields`); otherwise ignored
   * (and dropped from the result).
   * @template {Record<string, Type<any>>} F
   * @param {F} fields
   * @param {{ name?: string, strict?: boolean }} [options]
   * @returns {Type<{ [K in keyof F]: ReturnType<F[K]['decode']> }>}
   */
  object: (fields, options = {}) => {
    const expected = `struct ${options.name ?? 'object'}`;
    const names = Object.keys(fields);
    /** @param {unknown} v */
    // Indexed loops and no per-call arrays of pairs: this runs on every event in an
    // interpreter, where each allocation and iterator step shows.
    const decode = (v) => {
      if (!isPlainObject(v)) throw invalidType(v, expected);
      const input = /** @type {Record<string, unknown>} */ (v);
      /** @type {Record<string, unknown>} */
      const out = {};
      const keys = Object.keys(input);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        const field = hasOwn.call(fields, k) ? fields[k] : undefined;
        if (!field) {
          if (options.strict) throw new DecodeError(`unknown field \`${k}\`, ${expectedFields(names)}`);
          continue;
        }
        out[k] = field.decode(input[k]);
      }
      for (let i = 0; i < names.length; i++) {
        const k = names[i];
        if (hasOwn.call(input, k)) continue;
        const field = fields[k];
        if (!field.hasDefault) throw new DecodeError(`missing field \`${k}\``);
        out[k] = field.makeDefault();
      }
      return /** @type {any} */ (out);
    };
    const all = names.every((k) => fields[k].hasDefault);
    return makeType(expected, decode, all ? { has: true, make: () => decode({}) } : { has: false });
  },
};
