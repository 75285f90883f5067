// @ts-check
/**
 * kubewasm for JavaScript: a thin layer over the raw componentize-js bindings of
 * `wit/plugin.wit`, so a plugin works with plain objects:
 *
 * ```js
 * import { definePlugin, manifest, watchKind, grant, intent, log, t } from '../kubewasm/index.js';
 *
 * export const handler = definePlugin({
 *   settings: t.object({ suffix: t.string().default('copy') }, { strict: true }),
 *   describe: (settings) => manifest('configmap-copier', '0.1.0', {
 *     watches: [watchKind('configmaps', 'v1', 'ConfigMap')],
 *     grants: [grant('', 'ConfigMap', ['create'])],
 *   }),
 *   handle(event, settings) {
 *     if (event.isDeleted) return [];
 *     const cm = event.object;                       // parsed JSON; malformed → permanent error
 *     return [intent.create({ ...copy }, { ownedByTrigger: true })];
 *   },
 * });
 * ```
 *
 * Intents are plain objects shaped like the test-case files of `kubewasm test`:
 * `{ create: {...} }`, `{ patch: {...} }`, `{ delete: {...} }`. `definePlugin` turns them
 * into the WIT records (camelCase keys, `{ tag, val }` variants, JSON text bodies).
 */

import * as host from 'kubewasm:plugin/host@0.1.0';
import { DecodeError, t } from './schema.js';

export { DecodeError, t, describeValue } from './schema.js';

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/**
 * A failed `handle` call. `retry: true` asks the host to retry the event with backoff;
 * `retry: false` drops it (malformed objects, invalid settings).
 */
export class HandleError extends Error {
  /**
   * @param {string} message
   * @param {boolean} retry
   */
  constructor(message, retry) {
    super(message);
    this.name = 'HandleError';
    this.retry = retry;
  }
}

/**
 * A permanent error (the event is dropped): `throw permanent('spec.x must be set')`.
 * @param {string} message
 */
export function permanent(message) {
  return new HandleError(message, false);
}

/**
 * A transient error (the host retries the event with backoff).
 * @param {string} message
 */
export function retryable(message) {
  return new HandleError(message, true);
}

// ---------------------------------------------------------------------------------------
// Logging
// ---------------------------------------------------------------------------------------

/** @typedef {'trace' | 'debug' | 'info' | 'warn' | 'error'} LogLevel */

/**
 * Lines go to the host's log, tagged with the plugin and the object being handled.
 * (`console.log` goes nowhere: the host links stdout to nothing.)
 */
export const log = {
  /** @param {string} message */
  trace: (message) => host.log('trace', String(message)),
  /** @param {string} message */
  debug: (message) => host.log('debug', String(message)),
  /** @param {string} message */
  info: (message) => host.log('info', String(message)),
  /** @param {string} message */
  warn: (message) => host.log('warn', String(message)),
  /** @param {string} message */
  error: (message) => host.log('error', String(message)),
};

// ---------------------------------------------------------------------------------------
// Unstructured objects
// ---------------------------------------------------------------------------------------

/** @typedef {Record<string, any>} KubeObject A Kubernetes object as parsed JSON. */

/** @param {unknown} v @returns {v is Record<string, any>} */
export function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** @type {(this: unknown, key: PropertyKey) => boolean} */
const hasOwn = Object.prototype.hasOwnProperty;

/**
 * A parsed pointer: its keys, and for each the array index it names (-1 when it is not one).
 * @typedef {{ keys: string[], indexes: number[] }} Pointer
 */

/** Parsed pointers by text: plugins use a handful of constant pointers on every call. */
/** @type {Map<string, Pointer>} */
const pointers = new Map();
/** Pointers built at run time (`/metadata/labels/${k}`) must not grow the cache forever. */
const MAX_CACHED_POINTERS = 512;

/**
 * @param {string} pointer starts with '/'
 * @returns {Pointer}
 */
function parsePointer(pointer) {
  let p = pointers.get(pointer);
  if (p !== undefined) return p;
  const keys = pointer.slice(1).split('/');
  const indexes = new Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const raw = keys[i];
    const key = raw.indexOf('~') < 0 ? raw : raw.replace(/~1/g, '/').replace(/~0/g, '~');
    keys[i] = key;
    indexes[i] = /^(0|[1-9][0-9]*)$/.test(key) ? Number(key) : -1;
  }
  p = { keys, indexes };
  if (pointers.size < MAX_CACHED_POINTERS) pointers.set(pointer, p);
  return p;
}

/**
 * The value at a JSON pointer (RFC 6901), e.g. `at(obj, '/status/state')`; `undefined` if absent.
 * @param {unknown} value
 * @param {string} pointer
 * @returns {unknown}
 */
export function at(value, pointer) {
  if (pointer === '') return value;
  if (pointer.charCodeAt(0) !== 47 /* '/' */) return undefined;
  const { keys, indexes } = parsePointer(pointer);
  /** @type {any} */
  let cur = value;
  for (let i = 0; i < keys.length; i++) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    if (Array.isArray(cur)) {
      const index = indexes[i];
      if (index < 0) return undefined;
      cur = cur[index];
    } else {
      const key = keys[i];
      cur = hasOwn.call(cur, key) ? cur[key] : undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

/**
 * The string at a JSON pointer, or `undefined` when absent or not a string.
 * @param {unknown} value
 * @param {string} pointer
 * @returns {string | undefined}
 */
export function strAt(value, pointer) {
  const v = at(value, pointer);
  return typeof v === 'string' ? v : undefined;
}

// The accessors below read fields directly: they run many times per event, and an
// interpreter makes every step of the general `at` path show. Same results as `strAt`.

/**
 * `obj[key]` when `obj` is a (non-array) object that has it, else undefined.
 * @param {unknown} obj
 * @param {string} key
 * @returns {unknown}
 */
function own(obj, key) {
  return typeof obj === 'object' && obj !== null && !Array.isArray(obj) && hasOwn.call(obj, key)
    ? /** @type {Record<string, unknown>} */ (obj)[key]
    : undefined;
}

/**
 * `obj.metadata[key]` (own properties of objects only), else undefined.
 * @param {unknown} obj
 * @param {string} key
 */
function meta(obj, key) {
  return own(own(obj, 'metadata'), key);
}

/** @param {unknown} v @returns {string | undefined} */
const str = (v) => (typeof v === 'string' ? v : undefined);

/** `apiVersion` (if a string). @param {unknown} obj */
export const apiVersionOf = (obj) => str(own(obj, 'apiVersion'));
/** `kind` (if a string). @param {unknown} obj */
export const kindOf = (obj) => str(own(obj, 'kind'));
/** `metadata.name` (if a string). @param {unknown} obj */
export const nameOf = (obj) => str(meta(obj, 'name'));
/** `metadata.namespace` (if a string). @param {unknown} obj */
export const namespaceOf = (obj) => str(meta(obj, 'namespace'));
/** `metadata.uid` (if a string). @param {unknown} obj */
export const uidOf = (obj) => str(meta(obj, 'uid'));
/** `metadata.resourceVersion` (if a string). @param {unknown} obj */
export const resourceVersionOf = (obj) => str(meta(obj, 'resourceVersion'));

/**
 * `metadata.generation` when it is an integer.
 * @param {unknown} obj
 * @returns {number | undefined}
 */
export function generationOf(obj) {
  const g = meta(obj, 'generation');
  return typeof g === 'number' && Number.isInteger(g) ? g : undefined;
}

/**
 * `metadata.labels[key]` (if a string).
 * @param {unknown} obj
 * @param {string} key
 */
export function labelOf(obj, key) {
  const labels = meta(obj, 'labels');
  return isObject(labels) && typeof labels[key] === 'string' ? labels[key] : undefined;
}

/**
 * `metadata.annotations[key]` (if a string).
 * @param {unknown} obj
 * @param {string} key
 */
export function annotationOf(obj, key) {
  const annotations = meta(obj, 'annotations');
  return isObject(annotations) && typeof annotations[key] === 'string' ? annotations[key] : undefined;
}

/**
 * `metadata.deletionTimestamp` is set: the object is going away (finalizers pending).
 * @param {unknown} obj
 */
export function isBeingDeleted(obj) {
  const ts = meta(obj, 'deletionTimestamp');
  return ts !== undefined && ts !== null;
}

/**
 * `metadata.name`, or a permanent error when it is missing or empty.
 * @param {unknown} obj
 * @returns {string}
 */
export function requireName(obj) {
  const name = nameOf(obj);
  if (!name) throw permanent('object has no metadata.name');
  return name;
}

// ---------------------------------------------------------------------------------------
// Object references, owner references, conditions
// ---------------------------------------------------------------------------------------

/**
 * Which object an intent acts on. `namespace` is absent for cluster-scoped objects.
 * @typedef {{ apiVersion: string, kind: string, namespace?: string, name: string }} ObjectRef
 */

/**
 * The reference of an object (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`
 * if present). A permanent error when one of the first three is missing.
 * @param {unknown} obj
 * @returns {ObjectRef}
 */
export function objectRef(obj) {
  const apiVersion = apiVersionOf(obj);
  if (apiVersion === undefined) throw permanent('object has no apiVersion');
  const kind = kindOf(obj);
  if (kind === undefined) throw permanent('object has no kind');
  const namespace = namespaceOf(obj);
  const name = requireName(obj);
  return namespace === undefined ? { apiVersion, kind, name } : { apiVersion, kind, namespace, name };
}

/**
 * A reference built from its parts; `namespace` undefined/null for cluster-scoped objects.
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | null | undefined} namespace
 * @param {string} name
 * @returns {ObjectRef}
 */
export function ref(apiVersion, kind, namespace, name) {
  return namespace == null ? { apiVersion, kind, name } : { apiVersion, kind, namespace, name };
}

/** The API group of an apiVersion (`''` for the core group `v1`). @param {string} apiVersion */
export function groupOf(apiVersion) {
  const i = apiVersion.lastIndexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

/**
 * @typedef {object} OwnerReference
 * @property {string} apiVersion
 * @property {string} kind
 * @property {string} name
 * @property {string} uid
 * @property {boolean} [controller]
 * @property {boolean} [blockOwnerDeletion]
 */

/**
 * An owner reference to `owner` (needs apiVersion, kind, metadata.name, metadata.uid).
 * Usually `intent.create(obj, { ownedByTrigger: true })` is all you need: the host adds
 * the controller reference to the triggering object. Use this to point at another owner.
 * @param {unknown} owner
 * @param {{ controller?: boolean }} [options] `controller: true` also sets blockOwnerDeletion
 * @returns {OwnerReference}
 */
export function ownerReference(owner, options = {}) {
  /** @param {string | undefined} v @param {string} what */
  const need = (v, what) => {
    if (v === undefined) throw permanent(`owner has no ${what}`);
    return v;
  };
  /** @type {OwnerReference} */
  const r = {
    apiVersion: need(apiVersionOf(owner), 'apiVersion'),
    kind: need(kindOf(owner), 'kind'),
    name: need(nameOf(owner), 'metadata.name'),
    uid: need(uidOf(owner), 'metadata.uid'),
  };
  if (options.controller) {
    r.controller = true;
    r.blockOwnerDeletion = true;
  }
  return r;
}

/**
 * Adds `reference` to `obj.metadata.ownerReferences` (replacing one with the same uid).
 * Returns `obj`.
 * @template {KubeObject} O
 * @param {O} obj
 * @param {OwnerReference} reference
 * @returns {O}
 */
export function addOwnerReference(obj, reference) {
  if (!isObject(obj)) throw permanent('not a JSON object');
  const o = /** @type {Record<string, any>} */ (obj);
  if (o.metadata === undefined) o.metadata = {};
  if (!isObject(o.metadata)) throw permanent('metadata is not an object');
  if (o.metadata.ownerReferences === undefined) o.metadata.ownerReferences = [];
  const refs = o.metadata.ownerReferences;
  if (!Array.isArray(refs)) throw permanent('metadata.ownerReferences is not a list');
  o.metadata.ownerReferences = refs.filter((r) => !(isObject(r) && r.uid === reference.uid));
  o.metadata.ownerReferences.push({ ...reference });
  return obj;
}

/**
 * Whether `obj` has an owner reference with uid `ownerUid`.
 * @param {unknown} obj
 * @param {string} ownerUid
 */
export function isOwnedBy(obj, ownerUid) {
  const refs = at(obj, '/metadata/ownerReferences');
  return Array.isArray(refs) && refs.some((r) => isObject(r) && r.uid === ownerUid);
}

/**
 * A status condition (`metav1.Condition`).
 * @typedef {object} Condition
 * @property {string} type
 * @property {'True' | 'False' | 'Unknown'} status
 * @property {string} [reason]
 * @property {string} [message]
 * @property {number} [observedGeneration]
 * @property {string} [lastTransitionTime]
 */

/**
 * A condition in the Kubernetes convention.
 *
 * - `status`: `true`/`false` or `'True'`/`'False'`/`'Unknown'`;
 * - `observedGenerationOf: obj` copies `obj.metadata.generation` (when an integer);
 * - `transitionedFrom: obj` sets `lastTransitionTime`: the time of the same-type condition
 *   in `obj.status.conditions` when its status is unchanged (so re-applying is a no-op),
 *   the current time otherwise. Without it, `lastTransitionTime` is left out.
 * Empty `reason`/`message` are left out.
 *
 * @param {string} type
 * @param {boolean | 'True' | 'False' | 'Unknown'} status
 * @param {{ reason?: string, message?: string, observedGenerationOf?: unknown,
 *           transitionedFrom?: unknown, now?: () => string }} [options]
 * @returns {Condition}
 */
export function condition(type, status, options = {}) {
  /** @type {'True' | 'False' | 'Unknown'} */
  const s = status === true ? 'True' : status === false ? 'False' : status;
  /** @type {Condition} */
  const c = { type, status: s };
  if (options.reason) c.reason = options.reason;
  if (options.message) c.message = options.message;
  if (options.observedGenerationOf !== undefined) {
    const g = generationOf(options.observedGenerationOf);
    if (g !== undefined) c.observedGeneration = g;
  }
  if (options.transitionedFrom !== undefined) {
    const now = options.now ?? nowRfc3339;
    const conditions = at(options.transitionedFrom, '/status/conditions');
    const previous = Array.isArray(conditions)
      ? conditions.find((p) => isObject(p) && p.type === type)
      : undefined;
    if (previous && previous.status === s) {
      c.lastTransitionTime =
        typeof previous.lastTransitionTime === 'string' ? previous.lastTransitionTime : now();
    } else {
      c.lastTransitionTime = now();
    }
  }
  return c;
}

/** The current UTC time, RFC 3339 with second precision (`2026-01-02T03:04:05Z`). */
export function nowRfc3339() {
  const iso = new Date().toISOString();
  // `YYYY-MM-DDTHH:MM:SS.sssZ` for years 0-9999; anything else takes the general path.
  return iso.length === 24 ? `${iso.slice(0, 19)}Z` : iso.replace(/\.\d+Z$/, 'Z');
}

// ---------------------------------------------------------------------------------------
// Intents
// ---------------------------------------------------------------------------------------

/**
 * @typedef {{ create: { object: KubeObject, ownedByTrigger: boolean, force: boolean } }} CreateIntent
 * @typedef {{ patch: { target: ObjectRef, body: KubeObject, strategy: 'apply' | 'merge',
 *                      status: boolean, force: boolean } }} PatchIntent
 * @typedef {'Background' | 'Foreground' | 'Orphan'} Propagation
 * @typedef {{ delete: { target: ObjectRef, uid?: string, resourceVersion?: string,
 *                       propagation?: Propagation } }} DeleteIntent
 * @typedef {CreateIntent | PatchIntent | DeleteIntent} Intent
 */

/**
 * @param {ObjectRef | KubeObject} target
 * @returns {ObjectRef}
 */
function toRef(target) {
  if (isObject(target) && isObject(/** @type {any} */ (target).metadata)) return objectRef(target);
  const r = /** @type {ObjectRef} */ (target);
  return ref(r.apiVersion, r.kind, r.namespace, r.name);
}

/** Builders for the writes a plugin asks for. */
export const intent = {
  /**
   * Create or converge a whole object with server-side apply.
   * `ownedByTrigger`: the host makes the triggering object its controller owner (GC).
   * `force`: take fields other managers own (needs a grant with `allowForce`).
   * @param {KubeObject} object
   * @param {{ ownedByTrigger?: boolean, force?: boolean }} [options]
   * @returns {CreateIntent}
   */
  create(object, options = {}) {
    return {
      create: { object, ownedByTrigger: !!options.ownedByTrigger, force: !!options.force },
    };
  },

  /**
   * Patch `target` with server-side apply: `body` is a partial object with the fields this
   * plugin manages (apiVersion, kind, metadata.name are filled in by the host when absent).
   * `target` is an ObjectRef or the object itself. `status: true` patches the status subresource.
   * @param {ObjectRef | KubeObject} target
   * @param {KubeObject} body
   * @param {{ status?: boolean, force?: boolean }} [options]
   * @returns {PatchIntent}
   */
  applyPatch(target, body, options = {}) {
    return {
      patch: {
        target: toRef(target),
        body,
        strategy: 'apply',
        status: !!options.status,
        force: !!options.force,
      },
    };
  },

  /**
   * Patch `target` with a JSON merge patch (RFC 7386): no field ownership.
   * @param {ObjectRef | KubeObject} target
   * @param {KubeObject} body
   * @param {{ status?: boolean }} [options]
   * @returns {PatchIntent}
   */
  mergePatch(target, body, options = {}) {
    return {
      patch: { target: toRef(target), body, strategy: 'merge', status: !!options.status, force: false },
    };
  },

  /**
   * Delete `target`, optionally only if it still has this uid / resourceVersion.
   * @param {ObjectRef | KubeObject} target
   * @param {{ uid?: string, resourceVersion?: string, propagation?: Propagation }} [options]
   * @returns {DeleteIntent}
   */
  delete(target, options = {}) {
    /** @type {DeleteIntent['delete']} */
    const d = { target: toRef(target) };
    if (options.uid !== undefined) d.uid = options.uid;
    if (options.resourceVersion !== undefined) d.resourceVersion = options.resourceVersion;
    if (options.propagation !== undefined) d.propagation = options.propagation;
    return { delete: d };
  },
};

// ---------------------------------------------------------------------------------------
// Manifest
// ---------------------------------------------------------------------------------------

/**
 * @typedef {{ kind: { apiVersion: string, kind: string } } | { resource: string }} ResourceRef
 * @typedef {object} Watch
 * @property {string} id
 * @property {ResourceRef} resource
 * @property {string} [namespace]
 * @property {string} [labelSelector]
 * @property {string} [fieldSelector]
 * @typedef {'create' | 'patch' | 'patch-status' | 'patchStatus' | 'delete'} Verb
 * @typedef {object} Grant
 * @property {string[]} apiGroups   `''` for the core group, `'*'` for any
 * @property {string[]} kinds       `'*'` for any
 * @property {string[]} namespaces  empty: everywhere
 * @property {Verb[]} verbs
 * @property {boolean} allowForce
 * @typedef {object} Manifest
 * @property {string} name
 * @property {string} version
 * @property {Watch[]} watches
 * @property {Grant[]} grants
 * @property {ResourceRef[]} reads
 * @typedef {{ namespace?: string, labelSelector?: string, fieldSelector?: string }} WatchOptions
 */

/**
 * @param {string} id
 * @param {ResourceRef} resource
 * @param {WatchOptions} options
 * @returns {Watch}
 */
function watch(id, resource, options) {
  /** @type {Watch} */
  const w = { id, resource };
  if (options.namespace != null) w.namespace = options.namespace;
  if (options.labelSelector != null) w.labelSelector = options.labelSelector;
  if (options.fieldSelector != null) w.fieldSelector = options.fieldSelector;
  return w;
}

/**
 * Watch a kind: `watchKind('dbs', 'mongodb.com/v1', 'MongoDB', { namespace: 'shop' })`.
 * @param {string} id
 * @param {string} apiVersion
 * @param {string} kind
 * @param {WatchOptions} [options]
 */
export function watchKind(id, apiVersion, kind, options = {}) {
  return watch(id, { kind: { apiVersion, kind } }, options);
}

/**
 * Watch a resource argument: `watchResource('sds', 'seldondeployments.v1.machinelearning.seldon.io')`.
 * @param {string} id
 * @param {string} resource
 * @param {WatchOptions} [options]
 */
export function watchResource(id, resource, options = {}) {
  return watch(id, { resource }, options);
}

/** A kind read through host.get/list without watching it. @param {string} apiVersion @param {string} kind @returns {ResourceRef} */
export const readKind = (apiVersion, kind) => ({ kind: { apiVersion, kind } });
/** A resource read through host.get/list without watching it. @param {string} resource @returns {ResourceRef} */
export const readResource = (resource) => ({ resource });

/**
 * Permission to write one kind of one group: `grant('mongodb.com', 'MongoDB', ['create'])`.
 * `namespace` (a string or undefined) limits it to one namespace; `allowForce` lets intents force.
 * @param {string | string[]} apiGroups
 * @param {string | string[]} kinds
 * @param {Verb[]} verbs
 * @param {{ namespace?: string | null, namespaces?: string[], allowForce?: boolean }} [options]
 * @returns {Grant}
 */
export function grant(apiGroups, kinds, verbs, options = {}) {
  const namespaces = [...(options.namespaces ?? [])];
  if (options.namespace != null) namespaces.push(options.namespace);
  return {
    apiGroups: [apiGroups].flat(),
    kinds: [kinds].flat(),
    namespaces,
    verbs: [...verbs],
    allowForce: !!options.allowForce,
  };
}

/**
 * A manifest: `manifest('my-plugin', '0.1.0', { watches: [...], grants: [...], reads: [...] })`.
 * @param {string} name
 * @param {string} version
 * @param {{ watches?: Watch[], grants?: Grant[], reads?: ResourceRef[] }} [parts]
 * @returns {Manifest}
 */
export function manifest(name, version, parts = {}) {
  return {
    name,
    version,
    watches: parts.watches ?? [],
    grants: parts.grants ?? [],
    reads: parts.reads ?? [],
  };
}

/**
 * What the host checks on load: name shape, at least one watch, unique non-empty watch ids.
 * Returns an error message or `undefined`.
 * @param {Manifest} m
 */
export function validateManifest(m) {
  if (!/^[A-Za-z0-9-]{1,63}$/.test(m.name)) {
    return `plugin name ${JSON.stringify(m.name)} must be 1-63 letters, digits or '-'`;
  }
  if (m.watches.length === 0) return `plugin ${m.name} declares no watches`;
  const ids = new Set();
  for (const w of m.watches) {
    if (!w.id) return 'a watch has an empty id';
    if (ids.has(w.id)) return `watch id ${JSON.stringify(w.id)} is declared twice`;
    ids.add(w.id);
  }
  return undefined;
}

/**
 * Whether the manifest's grants allow `i`, as the host checks it: `undefined` when allowed,
 * else a message naming what is missing. Use it in tests to keep grants and intents in step.
 * @param {Manifest} m
 * @param {Intent} i
 * @returns {string | undefined}
 */
export function permits(m, i) {
  /** @type {ObjectRef} */
  let target;
  let verb;
  let force = false;
  if ('create' in i) {
    target = objectRef(i.create.object);
    verb = 'create';
    force = !!i.create.force;
  } else if ('patch' in i) {
    target = i.patch.target;
    verb = i.patch.status ? 'patch-status' : 'patch';
    force = !!i.patch.force;
  } else {
    target = i.delete.target;
    verb = 'delete';
  }
  const group = groupOf(target.apiVersion);
  /** @param {string[]} list @param {string} v */
  const anyOr = (list, v) => list.some((x) => x === '*' || x === v);
  const ok = m.grants.some(
    (g) =>
      g.verbs.some((v) => VERBS[v] === verb) &&
      anyOr(g.apiGroups, group) &&
      anyOr(g.kinds, target.kind) &&
      ((g.namespaces ?? []).length === 0 ||
        (target.namespace !== undefined && g.namespaces.includes(target.namespace))) &&
      (!force || g.allowForce),
  );
  if (ok) return undefined;
  return `no grant allows ${verb}${force ? ' (forced)' : ''} on ${target.apiVersion} ${target.kind} in namespace ${target.namespace ?? '<cluster>'}`;
}

// ---------------------------------------------------------------------------------------
// Reading the host's caches
// ---------------------------------------------------------------------------------------

/**
 * @param {string} text
 * @param {string} kind
 */
function parseFromHost(text, kind) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw retryable(`host returned invalid JSON for ${kind}: ${errorText(e)}`);
  }
}

/**
 * One object from the host's cache, or `null` when there is none. The kind must be
 * watched or declared in the manifest's `reads`; host errors are retryable.
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | null | undefined} namespace
 * @param {string} name
 * @returns {KubeObject | null}
 */
export function get(apiVersion, kind, namespace, name) {
  let text;
  try {
    text = host.get(apiVersion, kind, namespace ?? undefined, name);
  } catch (e) {
    throw retryable(`host.get ${kind} ${name}: ${errorText(e)}`);
  }
  return text == null ? null : parseFromHost(text, kind);
}

/**
 * The objects of a kind from the host's cache, in one namespace or all, optionally
 * filtered by a label selector (`app=web`). Host errors are retryable.
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | null} [namespace]
 * @param {string | null} [labelSelector]
 * @returns {KubeObject[]}
 */
export function list(apiVersion, kind, namespace, labelSelector) {
  let texts;
  try {
    // The WIT function is `%list` (an escaped keyword); componentize-js names it `list`.
    texts = host.list(apiVersion, kind, namespace ?? undefined, labelSelector ?? undefined);
  } catch (e) {
    throw retryable(`host.list ${kind}: ${errorText(e)}`);
  }
  return texts.map((s) => parseFromHost(s, kind));
}

/** @param {unknown} e */
function errorText(e) {
  if (isObject(e) && 'payload' in e) return String(e.payload); // componentize-js ComponentError
  if (e instanceof Error) return e.message;
  return String(e);
}

// ---------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------

/** @typedef {'added' | 'modified' | 'deleted' | 'resync'} EventType */

/**
 * @param {string} text
 * @param {string} what
 */
function parseObject(text, what) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw permanent(`${what} is not valid JSON: ${errorText(e)}`);
  }
  if (!isObject(v)) throw permanent(`${what} is not a JSON object`);
  return v;
}

/** One change to one object, as the host delivers it. Objects are parsed on first access. */
export class Event {
  /**
   * @param {EventType} type
   * @param {string} watchId
   * @param {string} rawObject
   * @param {string} [rawOldObject]
   */
  constructor(type, watchId, rawObject, rawOldObject) {
    /** Why `handle` was called. */
    this.type = type;
    /** The id of the watch that matched. */
    this.watchId = watchId;
    /** The object as the JSON text the host sent. */
    this.rawObject = rawObject;
    /** The previous object's JSON text (`modified` only). */
    this.rawOldObject = rawOldObject ?? undefined;
    /** @type {KubeObject | undefined} */
    this._object = undefined;
    /** @type {KubeObject | null | undefined} */
    this._old = undefined;
  }

  /**
   * An event from plain objects; handy in tests.
   * @param {EventType} type
   * @param {unknown} object
   * @param {{ watchId?: string, oldObject?: unknown }} [options]
   */
  static of(type, object, options = {}) {
    const text = (/** @type {unknown} */ v) => (typeof v === 'string' ? v : JSON.stringify(v));
    return new Event(
      type,
      options.watchId ?? '',
      text(object),
      options.oldObject === undefined ? undefined : text(options.oldObject),
    );
  }

  get isAdded() { return this.type === 'added'; }
  get isModified() { return this.type === 'modified'; }
  get isDeleted() { return this.type === 'deleted'; }
  get isResync() { return this.type === 'resync'; }

  /**
   * The object, parsed. A permanent error unless it is a JSON object.
   * @returns {KubeObject}
   */
  get object() {
    if (this._object === undefined) this._object = parseObject(this.rawObject, 'object');
    return this._object;
  }

  /**
   * The previous object of a `modified` event, parsed; `null` when there is none.
   * @returns {KubeObject | null}
   */
  get oldObject() {
    if (this._old === undefined) {
      this._old = this.rawOldObject === undefined ? null : parseObject(this.rawOldObject, 'old object');
    }
    return this._old;
  }
}

// ---------------------------------------------------------------------------------------
// Conversion to the WIT records (componentize-js conventions)
// ---------------------------------------------------------------------------------------

const VERBS = /** @type {Record<string, string>} */ ({
  create: 'create',
  patch: 'patch',
  'patch-status': 'patch-status',
  patchStatus: 'patch-status',
  delete: 'delete',
});

/** @param {ResourceRef} r */
function witResourceRef(r) {
  if ('resource' in r) return { tag: 'resource', val: r.resource };
  return { tag: 'kind', val: { apiVersion: r.kind.apiVersion, kind: r.kind.kind } };
}

/**
 * The manifest as the WIT `manifest` record.
 * @param {Manifest} m
 */
export function toWitManifest(m) {
  return {
    name: m.name,
    version: m.version,
    watches: m.watches.map((w) => ({
      id: w.id,
      resource: witResourceRef(w.resource),
      namespace: w.namespace ?? undefined,
      labelSelector: w.labelSelector ?? undefined,
      fieldSelector: w.fieldSelector ?? undefined,
    })),
    grants: m.grants.map((g) => ({
      apiGroups: [...g.apiGroups],
      kinds: [...g.kinds],
      namespaces: [...(g.namespaces ?? [])],
      verbs: g.verbs.map((v) => {
        const w = VERBS[v];
        if (!w) throw new Error(`unknown verb ${JSON.stringify(v)}`);
        return w;
      }),
      allowForce: !!g.allowForce,
    })),
    reads: (m.reads ?? []).map(witResourceRef),
  };
}

/** @param {ObjectRef} r */
function witObjectRef(r) {
  return { apiVersion: r.apiVersion, kind: r.kind, namespace: r.namespace ?? undefined, name: r.name };
}

/** @param {unknown} body */
function jsonText(body) {
  return typeof body === 'string' ? body : JSON.stringify(body);
}

/**
 * One intent as the WIT `intent` variant.
 * @param {Intent} i
 */
export function toWitIntent(i) {
  if ('create' in i) {
    const c = i.create;
    return {
      tag: 'create',
      val: { object: jsonText(c.object), force: !!c.force, ownedByTrigger: !!c.ownedByTrigger },
    };
  }
  if ('patch' in i) {
    const p = i.patch;
    return {
      tag: 'patch',
      val: {
        target: witObjectRef(p.target),
        body: jsonText(p.body),
        strategy: p.strategy === 'merge' ? 'merge' : 'apply',
        status: !!p.status,
        force: !!p.force,
      },
    };
  }
  if ('delete' in i) {
    const d = i.delete;
    return {
      tag: 'delete',
      val: {
        target: witObjectRef(d.target),
        uid: d.uid ?? undefined,
        resourceVersion: d.resourceVersion ?? undefined,
        propagation: d.propagation ? d.propagation.toLowerCase() : undefined,
      },
    };
  }
  throw new Error(`not an intent: ${JSON.stringify(i)}`);
}

// ---------------------------------------------------------------------------------------
// The plugin
// ---------------------------------------------------------------------------------------

/**
 * @template S
 * @typedef {object} PluginDefinition
 * @property {import('./schema.js').Type<S> | ((json: unknown) => S)} [settings]
 *   How to read the settings file (`NAME.yaml` beside the .wasm, as JSON): a `t.object(...)`
 *   decoder, or a function of the parsed JSON (`undefined` when there is no file). Default:
 *   the parsed JSON as is.
 * @property {(settings: S) => Manifest} describe
 *   What the plugin watches and may write. Throw (anything) to reject the plugin.
 * @property {(event: Event, settings: S) => Intent[]} handle
 *   The writes for one event. `throw permanent(..)` / `throw retryable(..)` to fail.
 */

/**
 * Parses the settings text the host passes: none, empty or `null` → `undefined` JSON.
 * @template S
 * @param {PluginDefinition<S>['settings']} decoder
 * @param {string | undefined} text
 * @returns {S}
 */
function readSettings(decoder, text) {
  const trimmed = text == null ? '' : text.trim();
  let json;
  if (trimmed !== '' && trimmed !== 'null') {
    try {
      json = JSON.parse(trimmed);
    } catch (e) {
      throw new Error(`invalid settings: ${errorText(e)}`);
    }
  }
  try {
    if (!decoder) return /** @type {S} */ (json);
    if (typeof decoder === 'function') return decoder(json);
    return json === undefined ? decoder.makeDefault() : decoder.decode(json);
  } catch (e) {
    throw new Error(`invalid settings: ${errorText(e)}`);
  }
}

/**
 * Turns anything thrown into the WIT `handle-error` record. A `HandleError` keeps its retry
 * flag; a thrown string or DecodeError is permanent; anything else (a bug: TypeError, …) is
 * retried, like a trap in a Rust plugin.
 * @param {unknown} e
 */
export function toHandleError(e) {
  if (e instanceof HandleError) return { message: e.message, retry: e.retry };
  if (typeof e === 'string') return { message: e, retry: false };
  if (e instanceof DecodeError) return { message: e.message, retry: false };
  if (e instanceof Error) return { message: `${e.name}: ${e.message}`, retry: true };
  return { message: String(e), retry: true };
}

/** What `definePlugin` has cached before its first call: matches no settings text. */
const NOT_CACHED = Symbol('not cached');

/**
 * Wires a plugin to the WIT exports. Export the result as `handler`:
 * `export const handler = definePlugin({ settings, describe, handle })`.
 * @template S
 * @param {PluginDefinition<S>} plugin
 */
export function definePlugin(plugin) {
  // The host passes the same settings text on every call of an instance, so `handle` decodes
  // it once and keeps the result (or the error) for as long as the text stays the same.
  // Plugins get the same settings object on every call: treat it as read-only.
  /** @type {unknown} */
  let cachedText = NOT_CACHED;
  /** @type {{ settings: S } | { error: string }} */
  let cached = { error: 'settings not decoded' };
  /** @param {string | undefined} text */
  const settingsFor = (text) => {
    if (text !== cachedText) {
      try {
        cached = { settings: readSettings(plugin.settings, text) };
      } catch (e) {
        cached = { error: errorText(e) };
      }
      cachedText = text;
    }
    if ('error' in cached) throw permanent(cached.error);
    return cached.settings;
  };
  return {
    /**
     * WIT `describe(settings: option<string>) -> result<manifest, string>`.
     * @param {string | undefined} settingsText
     */
    describe(settingsText) {
      let m;
      try {
        const settings = readSettings(plugin.settings, settingsText);
        m = plugin.describe(settings);
        const problem = validateManifest(m);
        if (problem) throw new Error(problem);
        return toWitManifest(m);
      } catch (e) {
        // A thrown string is the `err` case of the result.
        throw e instanceof Error ? e.message : String(e);
      }
    },

    /**
     * WIT `handle(event, settings: option<string>) -> result<list<intent>, handle-error>`.
     * @param {{ eventType: EventType, watchId: string, object: string, oldObject?: string }} witEvent
     * @param {string | undefined} settingsText
     */
    handle(witEvent, settingsText) {
      try {
        const settings = settingsFor(settingsText);
        const event = new Event(witEvent.eventType, witEvent.watchId, witEvent.object, witEvent.oldObject);
        const intents = plugin.handle(event, settings) ?? [];
        return intents.map(toWitIntent);
      } catch (e) {
        // componentize-js turns a thrown record into the `err` case.
        throw toHandleError(e);
      }
    },

    /** The definition, for tests. */
    plugin,
  };
}
