// @ts-check
/**
 * seldon-endpoint, in JavaScript (twin of plugins/rust/seldon-endpoint, Rust).
 *
 * Know when it's ready: watch SeldonDeployments by resource string
 * (`seldondeployments.v1.machinelearning.seldon.io`) and, when one *becomes* Available
 * (`status.state`), ask for
 *  1. an Ingress (networking.k8s.io/v1) `<sd>` for host `<sd>.<namespace>.<domain>`,
 *     path `/` (Prefix) to Service `<sd>-<predictor>` port 8000, owned by the deployment;
 *  2. an annotation `kubewasm.dev/public-url: http://<host>/` on the SeldonDeployment
 *     (server-side apply, so only that annotation is this plugin's).
 * "Becomes": an added or resync event of an Available object, or a modified event whose
 * previous state was not Available. Updates while it stays Available produce no intents.
 */
import {
  DecodeError,
  definePlugin,
  grant,
  intent,
  log,
  manifest,
  permanent,
  ref,
  t,
  watchResource,
} from '../kubewasm/index.js';

export const NAME = 'seldon-endpoint';
export const VERSION = '0.1.0';
export const WATCH_ID = 'seldondeployments';
export const RESOURCE = 'seldondeployments.v1.machinelearning.seldon.io';
export const URL_ANNOTATION = 'kubewasm.dev/public-url';

/** Settings (`seldon-endpoint.yaml`); every field is optional. */
export const Settings = t.object(
  {
    /** Only watch (and write in) this namespace. */
    namespace: t.optional(t.string()),
    /** DNS suffix: the host is `<name>.<namespace>.<domain>`. */
    domain: t.string().default('example.com'),
    /** `spec.ingressClassName` of the Ingress; unset: the cluster's default class. */
    ingressClassName: t.optional(t.string()),
    /** The predictor Service's HTTP port. */
    servicePort: t.i32().default(8000),
  },
  { name: 'Settings', strict: true },
);

/** @typedef {ReturnType<typeof Settings.decode>} SettingsT */

/**
 * The parts of a SeldonDeployment this plugin reads (unknown fields ignored, so the real
 * CRD's huge schema does not matter).
 */
export const SeldonDeployment = t.object(
  {
    apiVersion: t.string(),
    kind: t.string(),
    metadata: t.object(
      {
        name: t.string(),
        namespace: t.optional(t.string()),
        deletionTimestamp: t.optional(t.string()),
      },
      { name: 'Metadata' },
    ),
    spec: t.object(
      { predictors: t.array(t.object({ name: t.optional(t.string()) }, { name: 'Predictor' })).default([]) },
      { name: 'Spec' },
    ),
    status: t.optional(t.object({ state: t.optional(t.string()) }, { name: 'Status' })),
  },
  { name: 'SeldonDeployment' },
);

/** @typedef {ReturnType<typeof SeldonDeployment.decode>} SeldonDeploymentT */

/**
 * Decodes an event's object text (`what`: "object" or "old object"); a permanent error if it
 * does not fit.
 * @param {string} text
 * @param {string} what
 * @returns {SeldonDeploymentT}
 */
function decode(text, what) {
  const prefix = `${what} does not decode as seldon_endpoint::SeldonDeployment`;
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw permanent(`${prefix}: ${e instanceof Error ? e.message : String(e)}`);
  }
  try {
    return SeldonDeployment.decode(json);
  } catch (e) {
    if (e instanceof DecodeError) throw permanent(`${prefix}: ${e.message}`);
    throw e;
  }
}

/** @param {SeldonDeploymentT} sd */
export const isAvailable = (sd) => sd.status?.state === 'Available';

/**
 * @param {SettingsT} settings
 */
export function describe(settings) {
  if (settings.domain === '' || settings.domain.startsWith('.')) {
    throw `domain ${JSON.stringify(settings.domain)} is not a DNS suffix`;
  }
  const namespace = settings.namespace;
  return manifest(NAME, VERSION, {
    watches: [watchResource(WATCH_ID, RESOURCE, { namespace })],
    grants: [
      grant('networking.k8s.io', 'Ingress', ['create'], { namespace }),
      grant('machinelearning.seldon.io', 'SeldonDeployment', ['patch'], { namespace }),
    ],
  });
}

/**
 * Whether this event is the moment the deployment becomes Available.
 * @param {import('../kubewasm/index.js').Event} event
 */
export function becomesAvailable(event) {
  if (event.isDeleted) return false;
  const now = decode(event.rawObject, 'object');
  if (!isAvailable(now) || now.metadata.deletionTimestamp !== undefined) return false;
  if (event.isModified && event.rawOldObject !== undefined) {
    return !isAvailable(decode(event.rawOldObject, 'old object'));
  }
  return true;
}

/**
 * Exposes the deployment when it becomes Available; nothing otherwise.
 * @param {import('../kubewasm/index.js').Event} event
 * @param {SettingsT} settings
 */
export function handle(event, settings) {
  if (!becomesAvailable(event)) return [];
  return expose(decode(event.rawObject, 'object'), settings);
}

/** @param {SeldonDeploymentT} sd */
function namespaceOf(sd) {
  const ns = sd.metadata.namespace;
  if (!ns) throw permanent('SeldonDeployment has no metadata.namespace');
  return ns;
}

/**
 * The public host name: `<name>.<namespace>.<domain>`.
 * @param {SeldonDeploymentT} sd
 * @param {SettingsT} settings
 */
export const hostFor = (sd, settings) => `${sd.metadata.name}.${namespaceOf(sd)}.${settings.domain}`;

/**
 * The Ingress and the URL annotation for an Available deployment.
 * @param {SeldonDeploymentT} sd
 * @param {SettingsT} settings
 */
export function expose(sd, settings) {
  const name = sd.metadata.name;
  if (name === '') throw permanent('SeldonDeployment has no metadata.name');
  const namespace = namespaceOf(sd);
  const host = hostFor(sd, settings);
  const predictor = sd.spec.predictors[0]?.name || 'default';
  const url = `http://${host}/`;

  /** @type {Record<string, unknown>} */
  const spec = {};
  if (settings.ingressClassName !== undefined) spec.ingressClassName = settings.ingressClassName;
  spec.rules = [
    {
      host,
      http: {
        paths: [
          {
            path: '/',
            pathType: 'Prefix',
            backend: {
              service: { name: `${name}-${predictor}`, port: { number: settings.servicePort } },
            },
          },
        ],
      },
    },
  ];
  const ingress = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'kubewasm' } },
    spec,
  };

  const annotation = {
    apiVersion: sd.apiVersion,
    kind: sd.kind,
    metadata: { name, namespace, annotations: { [URL_ANNOTATION]: url } },
  };
  log.info(`${namespace}/${name} is Available: exposing ${url}`);
  return [
    intent.create(ingress, { ownedByTrigger: true }),
    intent.applyPatch(ref(sd.apiVersion, sd.kind, namespace, name), annotation),
  ];
}

export const handler = definePlugin({ settings: Settings, describe, handle });
