// The Rust plugins' native tests (plugins/rust/*/src/tests.rs), ported to the JS twins and run
// through the WIT-level exports exactly as the host calls them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import * as kw from '../kubewasm/index.js';
import * as cs from '../contentsite-provisioner/index.js';
import * as mm from '../mongodb-monitor/index.js';
import * as sd from '../seldon-endpoint/index.js';
import { callDescribe, callHandle, witEvent } from '../kubewasm/testing/index.js';

const clone = (v) => JSON.parse(JSON.stringify(v));

/** Every intent is inside the grants of the manifest `describe` returns (plain form). */
function assertPermitted(plugin, settings, event) {
  const s = plugin.Settings.decode(settings ?? {});
  const m = plugin.describe(s);
  for (const i of plugin.handle(kw.Event.of(event.eventType, JSON.parse(event.object), {
    oldObject: event.oldObject && JSON.parse(event.oldObject),
  }), s)) {
    assert.equal(kw.permits(m, i), undefined);
  }
  return m;
}

// --- contentsite-provisioner --------------------------------------------------------------

const site = () => ({
  apiVersion: 'sites.kubewasm.dev/v1alpha1',
  kind: 'ContentSite',
  metadata: { name: 'blog', namespace: 'web', uid: 'u-1', generation: 2 },
  spec: { title: 'Blog', database: { members: 1 } },
});

test('contentsite: added creates database, service and status', () => {
  const out = callHandle(cs.handler, witEvent('added', site(), { watchId: 'sites' })).ok;
  assert.equal(out.length, 3);
  assert.deepEqual(out[0], {
    tag: 'create',
    val: {
      ownedByTrigger: true, force: false,
      object: {
        apiVersion: 'mongodb.com/v1', kind: 'MongoDB',
        metadata: { name: 'blog-db', namespace: 'web',
          labels: { 'app.kubernetes.io/managed-by': 'kubewasm', 'app.kubernetes.io/part-of': 'blog' } },
        spec: {
          type: 'ReplicaSet', members: 1, version: '7.0.12', credentials: 'mongodb-credentials',
          opsManager: { configMapRef: { name: 'mongodb-project' } },
        },
      },
    },
  });
  assert.deepEqual(out[1].val.object, {
    apiVersion: 'v1', kind: 'Service',
    metadata: { name: 'blog', namespace: 'web', labels: { app: 'blog', 'app.kubernetes.io/managed-by': 'kubewasm' } },
    spec: { selector: { app: 'blog' }, ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] },
  });
  assert.ok(out[1].val.ownedByTrigger);
  const status = out[2].val;
  assert.equal(out[2].tag, 'patch');
  assert.deepEqual(status.target, { apiVersion: cs.SITE_API_VERSION, kind: 'ContentSite', namespace: 'web', name: 'blog' });
  assert.ok(status.status && !status.force && status.strategy === 'apply');
  const cond = status.body.status.conditions[0];
  assert.match(cond.lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  delete cond.lastTransitionTime;
  assert.deepEqual(status.body, {
    apiVersion: cs.SITE_API_VERSION, kind: 'ContentSite', metadata: { name: 'blog', namespace: 'web' },
    status: {
      databaseRef: 'blog-db', serviceRef: 'blog', observedGeneration: 2,
      conditions: [{ type: 'Provisioned', status: 'True', reason: 'ChildrenRequested',
        message: 'MongoDB blog-db and Service blog requested', observedGeneration: 2 }],
    },
  });
});

test('contentsite: modified and resync converge the same way', () => {
  const next = site();
  next.spec.database = { members: 5, version: '8.0.0', type: 'Standalone' };
  const a = callHandle(cs.handler, witEvent('modified', next, { oldObject: site() })).ok;
  assert.deepEqual(a[0].val.object.spec, {
    type: 'Standalone', members: 5, version: '8.0.0', credentials: 'mongodb-credentials',
    opsManager: { configMapRef: { name: 'mongodb-project' } },
  });
  const b = callHandle(cs.handler, witEvent('resync', next)).ok;
  assert.deepEqual(b.slice(0, 2), a.slice(0, 2));
});

test('contentsite: the condition time is stable once set', () => {
  const s = site();
  s.status = { conditions: [{ type: 'Provisioned', status: 'True', lastTransitionTime: '2026-01-01T00:00:00Z' }] };
  const out = callHandle(cs.handler, witEvent('resync', s)).ok;
  assert.equal(out[2].val.body.status.conditions[0].lastTransitionTime, '2026-01-01T00:00:00Z');
});

test('contentsite: settings provide defaults and are strict', () => {
  const settings = { database: { members: 7, version: '6.0.5' }, service: { port: 8080, targetPort: 3000 } };
  const s = site();
  s.spec = { title: 'no database section' };
  const out = callHandle(cs.handler, witEvent('added', s), settings).ok;
  assert.deepEqual(out[0].val.object.spec, {
    type: 'ReplicaSet', members: 7, version: '6.0.5', credentials: 'mongodb-credentials',
    opsManager: { configMapRef: { name: 'mongodb-project' } },
  });
  assert.equal(out[1].val.object.spec.ports[0].targetPort, 3000);
  assert.match(callDescribe(cs.handler, { datbase: {} }).err, /unknown field `datbase`/);
  assert.deepEqual(callHandle(cs.handler, witEvent('added', site()), { datbase: {} }).err.retry, false);
});

test('contentsite: deleted and deleting sites need no intents', () => {
  assert.deepEqual(callHandle(cs.handler, witEvent('deleted', site())).ok, []);
  const s = site();
  s.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  assert.deepEqual(callHandle(cs.handler, witEvent('modified', s, { oldObject: site() })).ok, []);
});

test('contentsite: malformed sites are permanent errors', () => {
  const bad = [
    '{oops',
    { apiVersion: cs.SITE_API_VERSION, kind: 'ContentSite', metadata: { namespace: 'web' } },
    { apiVersion: cs.SITE_API_VERSION, kind: 'ContentSite', metadata: { name: 'x' } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'y' } },
    (() => { const s = site(); s.spec.database.members = 'three'; return s; })(),
    (() => { const s = site(); s.spec.database.members = 0; return s; })(),
  ];
  for (const obj of bad) {
    const { err } = callHandle(cs.handler, witEvent('added', obj));
    assert.ok(err && err.retry === false, JSON.stringify(obj));
  }
});

test('contentsite: grants cover exactly what it writes', () => {
  for (const settings of [undefined, { namespace: 'web' }]) {
    const m = assertPermitted(cs, settings, witEvent('added', site()));
    assert.deepEqual(m.grants.map((g) => g.verbs), [['create'], ['create'], ['patch-status']]);
  }
  const scoped = cs.describe(cs.Settings.decode({ namespace: 'other' }));
  assert.equal(scoped.watches[0].namespace, 'other');
  const out = cs.handle(kw.Event.of('added', site()), cs.Settings.makeDefault());
  assert.ok(kw.permits(scoped, out[0]));
  const wit = callDescribe(cs.handler).ok;
  assert.deepEqual(wit.watches[0].resource, { tag: 'kind', val: { apiVersion: cs.SITE_API_VERSION, kind: 'ContentSite' } });
  assert.equal(wit.version, '0.1.0');
});

// --- mongodb-monitor ----------------------------------------------------------------------

const db = () => ({
  apiVersion: 'mongodb.com/v1', kind: 'MongoDB',
  metadata: { name: 'orders', namespace: 'shop', uid: 'u-9' },
  spec: { type: 'ReplicaSet', members: 3, version: '7.0.12' },
});

test('mongodb-monitor: added creates an owned ServiceMonitor', () => {
  const out = callHandle(mm.handler, witEvent('added', db()), { labels: { release: 'prometheus' }, interval: '15s' }).ok;
  assert.deepEqual(out, [{
    tag: 'create',
    val: {
      ownedByTrigger: true, force: false,
      object: {
        apiVersion: 'monitoring.coreos.com/v1', kind: 'ServiceMonitor',
        metadata: { name: 'orders-monitor', namespace: 'shop',
          labels: { app: 'orders', 'app.kubernetes.io/managed-by': 'kubewasm', release: 'prometheus' } },
        spec: { selector: { matchLabels: { app: 'orders' } }, endpoints: [{ port: 'metrics', interval: '15s' }] },
      },
    },
  }]);
});

test('mongodb-monitor: modified and resync converge; deleted needs nothing', () => {
  const newer = db();
  newer.spec.members = 5;
  const a = callHandle(mm.handler, witEvent('modified', newer, { oldObject: db() })).ok;
  assert.deepEqual(callHandle(mm.handler, witEvent('resync', newer)).ok, a);
  assert.equal(a[0].val.object.spec.endpoints[0].interval, '30s');
  assert.deepEqual(callHandle(mm.handler, witEvent('deleted', db())).ok, []);
  const going = db();
  going.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  assert.deepEqual(callHandle(mm.handler, witEvent('modified', going, { oldObject: db() })).ok, []);
});

test('mongodb-monitor: the projection it declares is enough', () => {
  // What the host delivers under FIELDS: the identity and metadata.deletionTimestamp.
  const lean = { apiVersion: 'mongodb.com/v1', kind: 'MongoDB', metadata: { name: 'orders', namespace: 'shop', uid: 'u-9' } };
  assert.deepEqual(callHandle(mm.handler, witEvent('added', lean)).ok, callHandle(mm.handler, witEvent('added', db())).ok);
  lean.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  assert.deepEqual(callHandle(mm.handler, witEvent('resync', lean)).ok, []);
});

test('mongodb-monitor: malformed objects are permanent errors', () => {
  for (const obj of [
    'not json',
    { apiVersion: 'mongodb.com/v1', kind: 'MongoDB', metadata: { namespace: 'x' } },
    { apiVersion: 'mongodb.com/v1', kind: 'MongoDB', metadata: { name: 'x' } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x', namespace: 'y' } },
  ]) {
    assert.equal(callHandle(mm.handler, witEvent('added', obj)).err.retry, false);
  }
});

test('mongodb-monitor: settings are validated in describe', () => {
  assert.ok(callDescribe(mm.handler).ok);
  assert.ok(callDescribe(mm.handler, { interval: '1m30s' }).ok);
  assert.match(callDescribe(mm.handler, { interval: 'soon' }).err, /Prometheus duration/);
  assert.ok(callDescribe(mm.handler, { intervall: '30s' }).err);
  for (const ok of ['0', '30s', '1m30s', '1h', '2d12h', '500ms', '1s500ms']) assert.ok(mm.isPrometheusDuration(ok), ok);
  for (const bad of ['', '30', 's', '30x', '30s1m', '1.5s', '-1s']) assert.ok(!mm.isPrometheusDuration(bad), bad);
});

test('mongodb-monitor: grants cover exactly what it writes', () => {
  const m = assertPermitted(mm, undefined, witEvent('added', db()));
  assert.deepEqual(m.grants.map((g) => g.verbs), [['create']]);
  assert.deepEqual(m.watches[0].fields, ['metadata.deletionTimestamp']);
  const scoped = mm.describe(mm.Settings.decode({ namespace: 'other' }));
  assert.equal(scoped.watches[0].namespace, 'other');
  assert.ok(kw.permits(scoped, mm.handle(kw.Event.of('added', db()), mm.Settings.makeDefault())[0]));
});

// --- seldon-endpoint ----------------------------------------------------------------------

const sdep = (state) => {
  const v = {
    apiVersion: 'machinelearning.seldon.io/v1', kind: 'SeldonDeployment',
    metadata: { name: 'iris', namespace: 'models', uid: 'u-3' },
    spec: { predictors: [{ name: 'main', graph: { name: 'classifier' }, replicas: 1 }] },
  };
  if (state) v.status = { state };
  return v;
};

test('seldon-endpoint: Creating → Available creates the Ingress and the URL annotation', () => {
  const out = callHandle(sd.handler, witEvent('modified', sdep('Available'), { oldObject: sdep('Creating') })).ok;
  assert.deepEqual(out, [
    {
      tag: 'create',
      val: {
        ownedByTrigger: true, force: false,
        object: {
          apiVersion: 'networking.k8s.io/v1', kind: 'Ingress',
          metadata: { name: 'iris', namespace: 'models', labels: { 'app.kubernetes.io/managed-by': 'kubewasm' } },
          spec: { rules: [{ host: 'iris.models.example.com', http: { paths: [{
            path: '/', pathType: 'Prefix',
            backend: { service: { name: 'iris-main', port: { number: 8000 } } },
          }] } }] },
        },
      },
    },
    {
      tag: 'patch',
      val: {
        target: { apiVersion: 'machinelearning.seldon.io/v1', kind: 'SeldonDeployment', namespace: 'models', name: 'iris' },
        body: { apiVersion: 'machinelearning.seldon.io/v1', kind: 'SeldonDeployment',
          metadata: { name: 'iris', namespace: 'models', annotations: { [sd.URL_ANNOTATION]: 'http://iris.models.example.com/' } } },
        strategy: 'apply', status: false, force: false,
      },
    },
  ]);
});

test('seldon-endpoint: only the transition into Available writes', () => {
  const A = sdep('Available');
  const cases = [
    ['added available', witEvent('added', A), 2],
    ['resync available', witEvent('resync', A), 2],
    ['added creating', witEvent('added', sdep('Creating')), 0],
    ['added without status', witEvent('added', sdep()), 0],
    ['no status → available', witEvent('modified', A, { oldObject: sdep() }), 2],
    ['failed → available', witEvent('modified', A, { oldObject: sdep('Failed') }), 2],
    ['available → available', witEvent('modified', A, { oldObject: A }), 0],
    ['available → failed', witEvent('modified', sdep('Failed'), { oldObject: A }), 0],
    ['deleted', witEvent('deleted', A), 0],
  ];
  for (const [label, ev, n] of cases) assert.equal(callHandle(sd.handler, ev).ok.length, n, label);
});

test('seldon-endpoint: settings, defaults and errors', () => {
  const A = sdep('Available');
  const out = callHandle(sd.handler, witEvent('added', A), { domain: 'ml.corp', ingressClassName: 'nginx', servicePort: 9000 }).ok;
  assert.equal(out[0].val.object.spec.ingressClassName, 'nginx');
  assert.equal(out[0].val.object.spec.rules[0].host, 'iris.models.ml.corp');
  assert.equal(out[0].val.object.spec.rules[0].http.paths[0].backend.service.port.number, 9000);
  const noPred = clone(A);
  noPred.spec.predictors = [];
  assert.equal(callHandle(sd.handler, witEvent('added', noPred)).ok[0].val.object.spec.rules[0].http.paths[0].backend.service.name, 'iris-default');
  assert.match(callDescribe(sd.handler, { domain: '.x' }).err, /not a DNS suffix/);
  const noNs = clone(A);
  delete noNs.metadata.namespace;
  assert.deepEqual(callHandle(sd.handler, witEvent('added', noNs)).err, { message: 'SeldonDeployment has no metadata.namespace', retry: false });
  const noName = clone(A);
  delete noName.metadata.name;
  assert.match(callHandle(sd.handler, witEvent('added', noName)).err.message,
    /^object does not decode as seldon_endpoint::SeldonDeployment: missing field `name`/);
  assert.equal(callHandle(sd.handler, witEvent('modified', A, { oldObject: '{' })).err.retry, false);
  const m = assertPermitted(sd, { namespace: 'models' }, witEvent('added', A));
  assert.deepEqual(m.grants.map((g) => g.verbs), [['create'], ['patch']]);
});
