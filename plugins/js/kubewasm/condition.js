// @ts-check
/** Status conditions in the Kubernetes convention (`metav1.Condition`). */

import { at, generationOf, isObject } from './object.js';

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
