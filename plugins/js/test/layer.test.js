import { test } from 'node:test';
import assert from 'node:assert/strict';

import * as kw from '../kubewasm/index.js';
import {
  callDescribe, callHandle, setFailure, setObjects, takeLogs, witEvent,
} from '../kubewasm/testing/index.js';

const site = {
  apiVersion: 'sites.kubewasm.dev/v1alpha1',
  kind: 'ContentSite',
  metadata: { name: 'blog', namespace: 'web', uid: 'u-1', generation: 2, labels: { a: 'b' } },
  status: { state: 'Available', conditions: [] },
};

test('accessors read strings and integers only', () => {
  assert.equal(kw.nameOf(site), 'blog');
  assert.equal(kw.namespaceOf(site), 'web');
  assert.equal(kw.uidOf(site), 'u-1');
  assert.equal(kw.generationOf(site), 2);
  assert.equal(kw.generationOf({ metadata: { generation: 2.5 } }), undefined);
  assert.equal(kw.labelOf(site, 'a'), 'b');
  assert.equal(kw.annotationOf(site, 'a'), undefined);
  assert.equal(kw.strAt(site, '/status/state'), 'Available');
  assert.equal(kw.strAt(site, '/metadata/generation'), undefined);
  assert.equal(kw.at({ a: [{ 'b/c': 1 }] }, '/a/0/b~1c'), 1);
  assert.equal(kw.at({ a: [1] }, '/a/01'), undefined);
  assert.equal(kw.isBeingDeleted(site), false);
  assert.equal(kw.isBeingDeleted({ metadata: { deletionTimestamp: null } }), false);
  assert.equal(kw.isBeingDeleted({ metadata: { deletionTimestamp: 'x' } }), true);
  assert.equal(kw.requireName(site), 'blog');
  assert.throws(() => kw.requireName({ metadata: { name: '' } }), (e) => e instanceof kw.HandleError && !e.retry);
});

test('object references', () => {
  assert.deepEqual(kw.objectRef(site), {
    apiVersion: 'sites.kubewasm.dev/v1alpha1', kind: 'ContentSite', namespace: 'web', name: 'blog',
  });
  assert.deepEqual(kw.objectRef({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'n' } }), {
    apiVersion: 'v1', kind: 'Namespace', name: 'n',
  });
  assert.throws(() => kw.objectRef({ kind: 'X', metadata: { name: 'a' } }), /no apiVersion/);
  assert.equal(kw.groupOf('v1'), '');
  assert.equal(kw.groupOf('networking.k8s.io/v1'), 'networking.k8s.io');
});

test('owner references replace the same uid', () => {
  const ref = kw.ownerReference(site, { controller: true });
  const child = { metadata: { name: 'blog-db' } };
  kw.addOwnerReference(child, ref);
  kw.addOwnerReference(child, ref);
  assert.deepEqual(child.metadata.ownerReferences, [{
    apiVersion: 'sites.kubewasm.dev/v1alpha1', kind: 'ContentSite', name: 'blog', uid: 'u-1',
    controller: true, blockOwnerDeletion: true,
  }]);
  assert.ok(kw.isOwnedBy(child, 'u-1'));
  assert.ok(!kw.isOwnedBy(child, 'other'));
  assert.throws(() => kw.ownerReference({ kind: 'X' }), /owner has no apiVersion/);
});

test('conditions keep lastTransitionTime while the status is unchanged', () => {
  const obj = { metadata: { generation: 4 }, status: { conditions: [
    { type: 'Ready', status: 'True', lastTransitionTime: '2020-01-01T00:00:00Z' },
  ] } };
  const now = () => '2030-01-01T00:00:00Z';
  assert.deepEqual(kw.condition('Ready', true, { reason: 'Ok', observedGenerationOf: obj, transitionedFrom: obj, now }), {
    type: 'Ready', status: 'True', reason: 'Ok', observedGeneration: 4, lastTransitionTime: '2020-01-01T00:00:00Z',
  });
  assert.equal(kw.condition('Ready', false, { transitionedFrom: obj, now }).lastTransitionTime, '2030-01-01T00:00:00Z');
  assert.equal(kw.condition('Other', true, { transitionedFrom: obj, now }).lastTransitionTime, '2030-01-01T00:00:00Z');
  assert.deepEqual(kw.condition('Ready', 'Unknown', { reason: 'Waiting', message: '' }), {
    type: 'Ready', status: 'Unknown', reason: 'Waiting',
  });
  assert.match(kw.nowRfc3339(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

test('intent builders and their WIT form', () => {
  const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'n' } };
  assert.deepEqual(kw.intent.create(svc, { ownedByTrigger: true }), {
    create: { object: svc, ownedByTrigger: true, force: false },
  });
  assert.deepEqual(kw.toWitIntent(kw.intent.create(svc, { force: true })), {
    tag: 'create', val: { object: JSON.stringify(svc), force: true, ownedByTrigger: false },
  });
  const p = kw.intent.applyPatch(svc, { status: { ok: true } }, { status: true });
  assert.deepEqual(p.patch.target, { apiVersion: 'v1', kind: 'Service', namespace: 'n', name: 's' });
  assert.deepEqual(kw.toWitIntent(p).val, {
    target: { apiVersion: 'v1', kind: 'Service', namespace: 'n', name: 's' },
    body: '{"status":{"ok":true}}', strategy: 'apply', status: true, force: false,
  });
  const m = kw.intent.mergePatch(kw.ref('v1', 'Namespace', null, 'x'), {});
  assert.equal(m.patch.strategy, 'merge');
  assert.equal(kw.toWitIntent(m).val.target.namespace, undefined);
  const d = kw.intent.delete(svc, { uid: 'u', resourceVersion: '5', propagation: 'Foreground' });
  assert.deepEqual(kw.toWitIntent(d), {
    tag: 'delete',
    val: { target: { apiVersion: 'v1', kind: 'Service', namespace: 'n', name: 's' }, uid: 'u', resourceVersion: '5', propagation: 'foreground' },
  });
});

test('manifest builders, validation, WIT form and grant checks', () => {
  const m = kw.manifest('p', '1', {
    watches: [
      kw.watchKind('cms', 'v1', 'ConfigMap', { namespace: 'web', labelSelector: 'a=b' }),
      kw.watchResource('sds', 'seldondeployments.v1.machinelearning.seldon.io', { fields: ['spec.predictors', 'status.state'] }),
    ],
    grants: [
      kw.grant('', 'Service', ['create'], { namespace: 'web' }),
      kw.grant('mongodb.com', '*', ['patch', 'patchStatus'], { allowForce: true }),
    ],
    reads: [kw.readKind('v1', 'Secret'), kw.readResource('namespaces', { fields: ['metadata'] })],
  });
  assert.equal(kw.validateManifest(m), undefined);
  const w = kw.toWitManifest(m);
  assert.deepEqual(w.watches[0], {
    id: 'cms', resource: { tag: 'kind', val: { apiVersion: 'v1', kind: 'ConfigMap' } },
    namespace: 'web', labelSelector: 'a=b', fieldSelector: undefined, fields: [],
  });
  assert.deepEqual(w.watches[1].resource, { tag: 'resource', val: 'seldondeployments.v1.machinelearning.seldon.io' });
  assert.deepEqual(w.watches[1].fields, ['spec.predictors', 'status.state']);
  assert.deepEqual(w.grants[1].verbs, ['patch', 'patch-status']);
  assert.deepEqual(w.reads, [
    { resource: { tag: 'kind', val: { apiVersion: 'v1', kind: 'Secret' } }, fields: [] },
    { resource: { tag: 'resource', val: 'namespaces' }, fields: ['metadata'] },
  ]);
  // The options' arrays are copied, never shared with the caller.
  const fields = ['status.phase'];
  const pods = kw.watchKind('pods', 'v1', 'Pod', { fields });
  fields.push('spec');
  assert.deepEqual(pods.fields, ['status.phase']);

  const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: 's', namespace: 'web' } };
  assert.equal(kw.permits(m, kw.intent.create(svc)), undefined);
  assert.match(kw.permits(m, kw.intent.create(svc, { force: true })), /forced/);
  assert.match(kw.permits(m, kw.intent.create({ ...svc, metadata: { name: 's', namespace: 'x' } })), /namespace x/);
  const db = kw.ref('mongodb.com/v1', 'MongoDB', 'any', 'db');
  assert.equal(kw.permits(m, kw.intent.applyPatch(db, {}, { status: true, force: true })), undefined);
  assert.match(kw.permits(m, kw.intent.delete(db)), /no grant allows delete/);

  assert.match(kw.validateManifest(kw.manifest('a_b', '1', { watches: m.watches })), /1-63/);
  assert.match(kw.validateManifest(kw.manifest('a', '1')), /no watches/);
  assert.match(kw.validateManifest(kw.manifest('a', '1', { watches: [m.watches[0], m.watches[0]] })), /twice/);
});

test('schema decoding follows serde', () => {
  const { t } = kw;
  const S = t.object({
    namespace: t.optional(t.string()),
    db: t.object({ members: t.u32().default(3), type: t.string().default('RS') }, { name: 'Db', strict: true }),
    labels: t.map(t.string()).default({}),
  }, { name: 'Settings', strict: true });
  assert.deepEqual(S.makeDefault(), { namespace: undefined, db: { members: 3, type: 'RS' }, labels: {} });
  assert.deepEqual(S.decode({ db: { members: 1 }, namespace: null }), { namespace: undefined, db: { members: 1, type: 'RS' }, labels: {} });
  const err = (v) => { try { S.decode(v); } catch (e) { assert.ok(e instanceof kw.DecodeError); return e.message; } return 'no error'; };
  assert.equal(err({ dbb: 1 }), 'unknown field `dbb`, expected one of `namespace`, `db`, `labels`');
  assert.equal(err({ db: { member: 1 } }), 'unknown field `member`, expected `members` or `type`');
  assert.equal(err({ db: { members: 'x' } }), 'invalid type: string "x", expected u32');
  assert.equal(err({ db: { members: -1 } }), 'invalid value: integer `-1`, expected u32');
  assert.equal(err({ db: { members: 1.5 } }), 'invalid type: floating point `1.5`, expected u32');
  assert.equal(err({ db: null }), 'invalid type: null, expected struct Db');
  assert.equal(err({ labels: { a: 1 } }), 'invalid type: integer `1`, expected a string');
  assert.equal(err([]), 'invalid type: sequence, expected struct Settings');
  const Loose = t.object({ name: t.string(), list: t.array(t.bool()).default([]) }, { name: 'Loose' });
  assert.deepEqual(Loose.decode({ name: 'x', extra: 1 }), { name: 'x', list: [] });
  assert.throws(() => Loose.decode({}), /missing field `name`/);
  assert.throws(() => Loose.decode({ name: 'x', list: null }), /expected a sequence/);
});

test('events parse lazily; malformed objects are permanent errors', () => {
  const ev = kw.Event.of('deleted', '{oops');
  assert.ok(ev.isDeleted);
  assert.throws(() => ev.object, (e) => e instanceof kw.HandleError && !e.retry && /not valid JSON/.test(e.message));
  assert.throws(() => kw.Event.of('added', [1]).object, /not a JSON object/);
  const m = kw.Event.of('modified', { a: 1 }, { oldObject: { a: 0 }, watchId: 'w' });
  assert.equal(m.watchId, 'w');
  assert.equal(m.object.a, 1);
  assert.equal(m.oldObject.a, 0);
  assert.equal(kw.Event.of('added', {}).oldObject, null);
});

test('host reads and logs', () => {
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns', labels: { app: 'web' } } };
  setObjects([cm, { ...cm, metadata: { name: 'b', namespace: 'other' } }]);
  assert.deepEqual(kw.get('v1', 'ConfigMap', 'ns', 'a'), cm);
  assert.equal(kw.get('v1', 'ConfigMap', 'ns', 'zzz'), null);
  assert.equal(kw.list('v1', 'ConfigMap').length, 2);
  assert.deepEqual(kw.list('v1', 'ConfigMap', null, 'app=web'), [cm]);
  setFailure('kind not cached');
  assert.throws(() => kw.get('v1', 'ConfigMap', 'ns', 'a'), (e) => e.retry && e.message === 'host.get ConfigMap a: kind not cached');
  assert.throws(() => kw.list('v1', 'ConfigMap'), (e) => e.retry && /host.list ConfigMap: kind not cached/.test(e.message));
  setFailure(undefined);
  takeLogs();
  kw.log.info('hello');
  kw.log.warn('careful');
  assert.deepEqual(takeLogs(), [{ level: 'info', message: 'hello' }, { level: 'warn', message: 'careful' }]);
});

test('definePlugin maps settings, results and errors to the WIT conventions', () => {
  const handler = kw.definePlugin({
    settings: kw.t.object({ mode: kw.t.string().default('ok') }, { strict: true }),
    describe: (s) => kw.manifest(s.mode === 'bad-name' ? 'bad name' : 'p', '1', {
      watches: [kw.watchKind('w', 'v1', 'ConfigMap')],
    }),
    handle(event, s) {
      if (s.mode === 'permanent') throw kw.permanent('nope');
      if (s.mode === 'retry') throw kw.retryable('later');
      if (s.mode === 'string') throw 'plain';
      if (s.mode === 'bug') return event.object.missing.field;
      if (s.mode === 'none') return undefined;
      return [kw.intent.create(event.object)];
    },
  });
  assert.equal(callDescribe(handler).ok.name, 'p');
  assert.match(callDescribe(handler, { mode: 'bad-name' }).err, /must be 1-63/);
  assert.match(callDescribe(handler, { mod: 1 }).err, /^invalid settings: unknown field `mod`/);
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } };
  assert.deepEqual(callHandle(handler, witEvent('added', cm)).ok[0].val.object, cm);
  assert.deepEqual(callHandle(handler, witEvent('added', cm), { mode: 'permanent' }).err, { message: 'nope', retry: false });
  assert.deepEqual(callHandle(handler, witEvent('added', cm), { mode: 'retry' }).err, { message: 'later', retry: true });
  assert.deepEqual(callHandle(handler, witEvent('added', cm), { mode: 'string' }).err, { message: 'plain', retry: false });
  const bug = callHandle(handler, witEvent('added', cm), { mode: 'bug' }).err;
  assert.ok(bug.retry && bug.message.startsWith('TypeError'));
  assert.deepEqual(callHandle(handler, witEvent('added', cm), { mode: 'none' }).ok, []);
  assert.deepEqual(callHandle(handler, witEvent('added', '{x')).err.retry, false);
  assert.match(callHandle(handler, witEvent('added', cm), { mode: 3 }).err.message, /^invalid settings: invalid type: integer `3`, expected a string/);
  assert.equal(handler.handle(witEvent('added', cm), '  null ').length, 1);
});
