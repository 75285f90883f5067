// @ts-check
/**
 * {{name}}: every ConfigMap labelled `kubewasm.dev/copy: "true"` gets a copy named
 * `<name>-<suffix>` in its namespace, annotated `kubewasm.dev/copied-from: <ns>/<name>` and
 * owned by the original (so it is garbage-collected with it). The copy carries no labels, so
 * it is not copied again.
 */
import {
  definePlugin, grant, intent, isBeingDeleted, log, manifest, namespaceOf, permanent,
  requireName, t, watchKind,
} from 'kubewasm';

export const NAME = '{{name}}';
export const WATCH_ID = 'configmaps';
export const SELECTOR = 'kubewasm.dev/copy=true';
export const COPIED_FROM = 'kubewasm.dev/copied-from';

/** Settings ({{name}}.yaml); all optional, unknown keys rejected. */
export const Settings = t.object(
  {
    /** The copy of NAME is called NAME-<suffix>. */
    suffix: t.string().default('copy'),
  },
  { name: 'Settings', strict: true },
);

export const handler = definePlugin({
  settings: Settings,

  describe: () =>
    manifest(NAME, '0.1.0', {
      watches: [watchKind(WATCH_ID, 'v1', 'ConfigMap', { labelSelector: SELECTOR })], // what to receive
      grants: [grant('', 'ConfigMap', ['create'])], // what it may write
    }),

  handle(event, settings) {
    if (event.isDeleted) return []; // the copy is owned by the original: GC removes it
    const cm = event.object; // parsed JSON; malformed: a permanent error
    if (isBeingDeleted(cm)) return [];
    const name = requireName(cm);
    const namespace = namespaceOf(cm);
    if (namespace === undefined) throw permanent('ConfigMap has no metadata.namespace');
    const copy = `${name}-${settings.suffix}`;
    log.info(`copying ConfigMap ${namespace}/${name} to ${copy}`);
    const data = cm.data !== null && typeof cm.data === 'object' && !Array.isArray(cm.data) ? cm.data : {};
    return [
      intent.create(
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: copy, namespace, annotations: { [COPIED_FROM]: `${namespace}/${name}` } },
          data,
        },
        { ownedByTrigger: true },
      ),
    ];
  },
});
