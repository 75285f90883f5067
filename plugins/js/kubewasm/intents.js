// @ts-check
/**
 * Intents: the writes a plugin asks for, as plain objects shaped like the test-case files
 * of `kubewasm test` (`{ create: {...} }`, `{ patch: {...} }`, `{ delete: {...} }`).
 */

import { isObject, objectRef, ref } from './object.js';

/**
 * @typedef {import('./object.js').KubeObject} KubeObject
 * @typedef {import('./object.js').ObjectRef} ObjectRef
 */

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
