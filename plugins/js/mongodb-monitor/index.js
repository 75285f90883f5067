// @ts-check
/**
 * mongodb-monitor, in JavaScript (twin of plugins/rust/mongodb-monitor, Rust).
 *
 * Watch what you don't own: for every MongoDB (mongodb.com/v1), whoever created it, ask
 * for a Prometheus Operator ServiceMonitor (monitoring.coreos.com/v1) `<db>-monitor` in the
 * same namespace, selecting the database's Services (`app: <db>`) and scraping their
 * `metrics` port. The ServiceMonitor is owned by the MongoDB: `deleted` needs no intents.
 * It uses nothing of a MongoDB but its identity and `metadata.deletionTimestamp`, and
 * declares so (`FIELDS`): the host delivers and caches only those.
 */
import {
  apiVersionOf,
  definePlugin,
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

export const NAME = 'mongodb-monitor';
export const VERSION = '0.1.0';
export const WATCH_ID = 'mongodbs';
/**
 * The fields of a MongoDB the plugin uses beyond its identity (apiVersion, kind, name,
 * namespace, uid), which the host always keeps: its projection.
 */
export const FIELDS = ['metadata.deletionTimestamp'];

/** Settings (`mongodb-monitor.yaml`); every field is optional. */
export const Settings = t.object(
  {
    /** Only watch (and write in) this namespace. */
    namespace: t.optional(t.string()),
    /** Scrape interval, a Prometheus duration such as `30s` or `1m30s`. */
    interval: t.string().default('30s'),
    /** The name of the Service port that serves metrics. */
    port: t.string().default('metrics'),
    /** Extra labels on the ServiceMonitor, e.g. `release: prometheus`. */
    labels: t.map(t.string()).default({}),
  },
  { name: 'Settings', strict: true },
);

/** @typedef {ReturnType<typeof Settings.decode>} SettingsT */

const UNITS = ['y', 'w', 'd', 'h', 'ms', 'm', 's']; // `ms` before `m` for prefix matching
const RANK = /** @type {Record<string, number>} */ ({ y: 0, w: 1, d: 2, h: 3, m: 4, s: 5, ms: 6 });

/**
 * Whether `s` is a Prometheus duration: one or more `<digits><unit>` with units
 * y, w, d, h, m, s, ms in that order (`0` alone is allowed too).
 * @param {string} s
 */
export function isPrometheusDuration(s) {
  if (s === '0') return true;
  if (s === '') return false;
  let rest = s;
  let last = -1;
  while (rest !== '') {
    const digits = /^[0-9]*/.exec(rest)?.[0].length ?? 0;
    if (digits === 0) return false;
    rest = rest.slice(digits);
    const unit = UNITS.find((u) => rest.startsWith(u));
    if (unit === undefined) return false;
    const r = RANK[unit];
    if (r <= last) return false;
    last = r;
    rest = rest.slice(unit.length);
  }
  return true;
}

/**
 * Checks the interval's syntax and the port name; an error message or undefined.
 * @param {SettingsT} settings
 */
export function validate(settings) {
  if (!isPrometheusDuration(settings.interval)) {
    return `interval ${JSON.stringify(settings.interval)} is not a Prometheus duration (e.g. 30s, 1m30s)`;
  }
  if (settings.port === '') return 'port must not be empty';
  return undefined;
}

/**
 * The manifest: watch MongoDBs; create ServiceMonitors.
 * @param {SettingsT} settings
 */
export function describe(settings) {
  const problem = validate(settings);
  if (problem) throw problem;
  const namespace = settings.namespace;
  return manifest(NAME, VERSION, {
    watches: [watchKind(WATCH_ID, 'mongodb.com/v1', 'MongoDB', { namespace, fields: FIELDS })],
    grants: [grant('monitoring.coreos.com', 'ServiceMonitor', ['create'], { namespace })],
  });
}

/**
 * A ServiceMonitor for every live MongoDB; nothing on deletion.
 * @param {import('../kubewasm/index.js').Event} event
 * @param {SettingsT} settings
 */
export function handle(event, settings) {
  if (event.isDeleted) return [];
  const db = event.object;
  if (isBeingDeleted(db)) return [];
  const monitor = serviceMonitorFor(db, settings);
  log.info(
    `monitoring MongoDB ${namespaceOf(db) ?? ''}/${nameOf(db) ?? ''} with ServiceMonitor ${JSON.stringify(monitor.metadata.name)}`,
  );
  return [intent.create(monitor, { ownedByTrigger: true })];
}

/**
 * The ServiceMonitor for one MongoDB.
 * @param {import('../kubewasm/index.js').KubeObject} db
 * @param {SettingsT} settings
 */
export function serviceMonitorFor(db, settings) {
  if (apiVersionOf(db) !== 'mongodb.com/v1' || kindOf(db) !== 'MongoDB') {
    throw permanent(
      `expected a mongodb.com/v1 MongoDB, got ${apiVersionOf(db) ?? '?'} ${kindOf(db) ?? '?'}`,
    );
  }
  const name = requireName(db);
  const namespace = namespaceOf(db);
  if (namespace === undefined) throw permanent('MongoDB has no metadata.namespace');
  const labels = { ...settings.labels, 'app.kubernetes.io/managed-by': 'kubewasm', app: name };
  return {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'ServiceMonitor',
    metadata: { name: `${name}-monitor`, namespace, labels },
    spec: {
      selector: { matchLabels: { app: name } },
      endpoints: [{ port: settings.port, interval: settings.interval }],
    },
  };
}

export const handler = definePlugin({ settings: Settings, describe, handle });
