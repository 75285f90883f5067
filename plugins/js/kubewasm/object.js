// @ts-check
/**
 * Unstructured objects (parsed JSON): JSON pointers, the common metadata accessors, object
 * references and owner references.
 */

import { permanent } from './errors.js';

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
