// @ts-check
/**
 * contentsite-provisioner, in JavaScript (twin of plugins/rust/contentsite-provisioner, Rust).
 *
 * Provision on demand: for every ContentSite (sites.kubewasm.dev/v1alpha1) that is added,
 * modified or resynced (and not being deleted), ask for
 *  1. a MongoDB (mongodb.com/v1) `<site>-db` in the site's namespace, its spec from the
 *     site's `spec.database` with defaults from the settings,
 *  2. a Service `<site>` selecting `app: <site>`, port 80 → 8080,
 *  3. the site's status (status subresource, server-side apply): databaseRef, serviceRef,
 *     observedGeneration and a `Provisioned` condition.
 * Both children are owned by the site, so a `deleted` event needs no intents.
 */
import {
  DecodeError,
  apiVersionOf,
  at,
  condition,
  definePlugin,
  generationOf,
  grant,
  intent,
  isBeingDeleted,
  kindOf,
  log,
  manifest,
  nameOf,
  namespaceOf,
  permanent,
  requireName,
  t,
  watchKind,
} from '../kubewasm/index.js';

export const NAME = 'contentsite-provisioner';
export const VERSION = '0.1.0';
export const WATCH_ID = 'sites';
export const SITE_API_VERSION = 'sites.kubewasm.dev/v1alpha1';
export const SITE_KIND = 'ContentSite';
const MANAGED_BY = ['app.kubernetes.io/managed-by', 'kubewasm'];

/** Where a MongoDB's project lives; the operator reads `spec.<manager>.configMapRef`. */
const MANAGERS = ['opsManager', 'cloudManager'];

/** Settings (`contentsite-provisioner.yaml`); every field is optional. */
export const Settings = t.object(
  {
    /** Only watch (and write in) this namespace. */
    namespace: t.optional(t.string()),
    /** Database defaults for sites that do not say. */
    database: t.object(
      {
        type: t.string().default('ReplicaSet'),
        members: t.u32().default(3),
        version: t.string().default('7.0.12'),
        /** `spec.credentials`: the Secret with the Ops Manager / Cloud Manager API key. */
        credentials: t.string().default('mongodb-credentials'),
        /** The ConfigMap naming the project. */
        projectConfigMap: t.string().default('mongodb-project'),
        /** `opsManager` or `cloudManager`: where the project lives. */
        manager: t.string().default('opsManager'),
      },
      { name: 'DatabaseDefaults', strict: true },
    ),
    /** The Service's ports. */
    service: t.object(
      {
        port: t.i32().default(80),
        targetPort: t.i32().default(8080),
      },
      { name: 'ServiceSettings', strict: true },
    ),
  },
  { name: 'Settings', strict: true },
);

/** What a site may say about its database (`spec.database`); unknown fields ignored. */
const DatabaseSpec = t.object(
  {
    type: t.optional(t.string()),
    members: t.optional(t.u32()),
    version: t.optional(t.string()),
  },
  { name: 'DatabaseSpec' },
);

/**
 * The manifest: watch ContentSites; create MongoDBs and Services; patch ContentSite status.
 * @param {ReturnType<typeof Settings.decode>} settings
 */
export function describe(settings) {
  const namespace = settings.namespace;
  if (!MANAGERS.includes(settings.database.manager)) {
    throw new Error(
      `database.manager must be one of ${MANAGERS.join(', ')}, not ${JSON.stringify(settings.database.manager)}`,
    );
  }
  return manifest(NAME, VERSION, {
    watches: [watchKind(WATCH_ID, SITE_API_VERSION, SITE_KIND, { namespace })],
    grants: [
      grant('mongodb.com', 'MongoDB', ['create'], { namespace }),
      grant('', 'Service', ['create'], { namespace }),
      grant('sites.kubewasm.dev', SITE_KIND, ['patch-status'], { namespace }),
    ],
  });
}

/**
 * Provisions on added/modified/resync; nothing on deleted or while the site is being deleted.
 * @param {import('../kubewasm/index.js').Event} event
 * @param {ReturnType<typeof Settings.decode>} settings
 */
export function handle(event, settings) {
  if (event.isDeleted) return []; // ownerReferences let the garbage collector clean up
  const site = event.object;
  if (isBeingDeleted(site)) {
    log.debug(`${nameOf(site) ?? '?'} is being deleted; nothing to do`);
    return [];
  }
  return provision(site, settings);
}

/**
 * The intents for one live ContentSite: its MongoDB, its Service, its status.
 * @param {import('../kubewasm/index.js').KubeObject} site
 * @param {ReturnType<typeof Settings.decode>} settings
 */
export function provision(site, settings) {
  if (apiVersionOf(site) !== SITE_API_VERSION || kindOf(site) !== SITE_KIND) {
    throw permanent(
      `expected a ${SITE_API_VERSION} ${SITE_KIND}, got ${apiVersionOf(site) ?? '?'} ${kindOf(site) ?? '?'}`,
    );
  }
  const name = requireName(site);
  const namespace = namespaceOf(site);
  if (namespace === undefined) throw permanent('ContentSite has no metadata.namespace');

  const raw = at(site, '/spec/database');
  let db;
  try {
    db = raw === undefined || raw === null ? DatabaseSpec.makeDefault() : DatabaseSpec.decode(raw);
  } catch (e) {
    if (e instanceof DecodeError) throw permanent(`invalid spec.database: ${e.message}`);
    throw e;
  }
  const members = db.members ?? settings.database.members;
  if (members === 0) throw permanent('spec.database.members must be at least 1');
  const dbName = `${name}-db`;

  const database = {
    apiVersion: 'mongodb.com/v1',
    kind: 'MongoDB',
    metadata: {
      name: dbName,
      namespace,
      labels: { [MANAGED_BY[0]]: MANAGED_BY[1], 'app.kubernetes.io/part-of': name },
    },
    spec: {
      type: db.type ?? settings.database.type,
      members,
      version: db.version ?? settings.database.version,
      credentials: settings.database.credentials,
      [settings.database.manager]: { configMapRef: { name: settings.database.projectConfigMap } },
    },
  };

  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace,
      labels: { app: name, [MANAGED_BY[0]]: MANAGED_BY[1] },
    },
    spec: {
      selector: { app: name },
      ports: [
        {
          name: 'http',
          protocol: 'TCP',
          port: settings.service.port,
          targetPort: settings.service.targetPort,
        },
      ],
    },
  };

  const provisioned = condition('Provisioned', true, {
    reason: 'ChildrenRequested',
    message: `MongoDB ${dbName} and Service ${name} requested`,
    observedGenerationOf: site,
    transitionedFrom: site,
  });
  /** @type {Record<string, unknown>} */
  const status = { databaseRef: dbName, serviceRef: name, conditions: [provisioned] };
  const generation = generationOf(site);
  if (generation !== undefined) status.observedGeneration = generation;
  const statusPatch = {
    apiVersion: SITE_API_VERSION,
    kind: SITE_KIND,
    metadata: { name, namespace },
    status,
  };

  log.info(`provisioning ${namespace}/${name}: MongoDB ${dbName}, Service ${name}`);
  return [
    intent.create(database, { ownedByTrigger: true }),
    intent.create(service, { ownedByTrigger: true }),
    intent.applyPatch(site, statusPatch, { status: true }),
  ];
}

export const handler = definePlugin({ settings: Settings, describe, handle });
