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
 *
 * The layer is split by concept, one module each (the same split as the Python and Go
 * layers): errors.js, log.js, object.js (unstructured objects, references, owner
 * references), condition.js, intents.js, manifest.js, host.js (the host's caches),
 * event.js, wit.js (conversion to the WIT records), plugin.js (`definePlugin`) and
 * schema.js (decoders). This module re-exports their public API: import from here.
 */

export { DecodeError, t, describeValue } from './schema.js';
export { HandleError, permanent, retryable } from './errors.js';
export { log } from './log.js';
export {
  isObject,
  at,
  strAt,
  apiVersionOf,
  kindOf,
  nameOf,
  namespaceOf,
  uidOf,
  resourceVersionOf,
  generationOf,
  labelOf,
  annotationOf,
  isBeingDeleted,
  requireName,
  objectRef,
  ref,
  groupOf,
  ownerReference,
  addOwnerReference,
  isOwnedBy,
} from './object.js';
export { condition, nowRfc3339 } from './condition.js';
export { intent } from './intents.js';
export {
  watchKind,
  watchResource,
  readKind,
  readResource,
  grant,
  manifest,
  validateManifest,
  permits,
} from './manifest.js';
export { get, list } from './host.js';
export { Event } from './event.js';
export { toWitManifest, toWitIntent } from './wit.js';
export { toHandleError, definePlugin } from './plugin.js';

/**
 * The layer's types, for `import('kubewasm').KubeObject` and the like.
 * @typedef {import('./log.js').LogLevel} LogLevel
 * @typedef {import('./object.js').KubeObject} KubeObject
 * @typedef {import('./object.js').ObjectRef} ObjectRef
 * @typedef {import('./object.js').OwnerReference} OwnerReference
 * @typedef {import('./condition.js').Condition} Condition
 * @typedef {import('./intents.js').CreateIntent} CreateIntent
 * @typedef {import('./intents.js').PatchIntent} PatchIntent
 * @typedef {import('./intents.js').Propagation} Propagation
 * @typedef {import('./intents.js').DeleteIntent} DeleteIntent
 * @typedef {import('./intents.js').Intent} Intent
 * @typedef {import('./manifest.js').ResourceRef} ResourceRef
 * @typedef {import('./manifest.js').Watch} Watch
 * @typedef {import('./manifest.js').Verb} Verb
 * @typedef {import('./manifest.js').Grant} Grant
 * @typedef {import('./manifest.js').Manifest} Manifest
 * @typedef {import('./manifest.js').WatchOptions} WatchOptions
 * @typedef {import('./event.js').EventType} EventType
 */

/**
 * @template S
 * @typedef {import('./plugin.js').PluginDefinition<S>} PluginDefinition
 */
