// @ts-check
/** Conversion to the WIT records (componentize-js conventions). */

/**
 * @typedef {import('./object.js').ObjectRef} ObjectRef
 * @typedef {import('./intents.js').Intent} Intent
 * @typedef {import('./manifest.js').ResourceRef} ResourceRef
 * @typedef {import('./manifest.js').Read} Read
 * @typedef {import('./manifest.js').Manifest} Manifest
 */

/** The verbs of a grant, by every name a plugin may use, as the WIT names them. */
export const VERBS = /** @type {Record<string, string>} */ ({
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
      fields: [...(w.fields ?? [])],
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
    reads: (m.reads ?? []).map((/** @type {Read} */ r) => ({
      resource: witResourceRef(r.resource),
      fields: [...(r.fields ?? [])],
    })),
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
