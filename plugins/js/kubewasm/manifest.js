// @ts-check
/**
 * The manifest: what a plugin watches, what it may write (grants) and what else it reads;
 * the checks the host makes on it.
 */

import { groupOf, objectRef } from './object.js';
import { VERBS } from './wit.js';

/**
 * @typedef {import('./object.js').ObjectRef} ObjectRef
 * @typedef {import('./intents.js').Intent} Intent
 */

/**
 * @typedef {{ kind: { apiVersion: string, kind: string } } | { resource: string }} ResourceRef
 * @typedef {object} Watch
 * @property {string} id
 * @property {ResourceRef} resource
 * @property {string} [namespace]
 * @property {string} [labelSelector]
 * @property {string} [fieldSelector]
 * @property {string[]} [fields]  the fields the plugin uses (its projection); none: whole objects
 * @typedef {object} Read
 * @property {ResourceRef} resource
 * @property {string[]} [fields]  as a watch's
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
 * @property {Read[]} reads
 * @typedef {{ namespace?: string, labelSelector?: string, fieldSelector?: string, fields?: string[] }} WatchOptions
 * @typedef {{ fields?: string[] }} ReadOptions
 */

/*
 * `fields` (a watch's or a read's option) declares the fields the plugin uses, its projection:
 * events and host.get/list of that kind then carry only those and the object's identity
 * (apiVersion, kind, metadata.name, namespace, uid, resourceVersion). Each is a path of keys
 * joined by '.'; a path keeps the whole value it reaches, a path crossing a list applies to
 * every element ('spec.containers.image'), and 'metadata' alone is a metadata-only
 * projection. A key containing '.' (a label) is kept through its parent ('metadata.labels').
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
  if (options.fields != null) w.fields = [...options.fields];
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

/**
 * @param {ResourceRef} resource
 * @param {ReadOptions} options
 * @returns {Read}
 */
function read(resource, options) {
  /** @type {Read} */
  const r = { resource };
  if (options.fields != null) r.fields = [...options.fields];
  return r;
}

/**
 * A kind read through host.get/list without watching it: `readKind('v1', 'Secret')`,
 * `readKind('v1', 'Namespace', { fields: ['metadata'] })`.
 * @param {string} apiVersion
 * @param {string} kind
 * @param {ReadOptions} [options]
 */
export const readKind = (apiVersion, kind, options = {}) => read({ kind: { apiVersion, kind } }, options);
/**
 * A resource read through host.get/list without watching it: `readResource('deployments.apps')`.
 * @param {string} resource
 * @param {ReadOptions} [options]
 */
export const readResource = (resource, options = {}) => read({ resource }, options);

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
 * @param {{ watches?: Watch[], grants?: Grant[], reads?: Read[] }} [parts]
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
