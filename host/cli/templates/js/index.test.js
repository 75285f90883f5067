// @ts-check
/// <reference types="node" />
// Unit tests of the plugin under node, no wasm: `npm test` (node --test, with
// `--import kubewasm/testing/register` mapping the component's `kubewasm:` host import to the
// fake host of kubewasm/testing). The real component runs the cases in tests/: `npm run cases`.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { Event, get, permits } from 'kubewasm';
import { callHandle, reset, setObjects, takeLogs, witEvent } from 'kubewasm/testing';
import { COPIED_FROM, handler, NAME, Settings } from './index.js';

/** A labelled ConfigMap, as the watch delivers it. */
const original = () => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'app-config', namespace: 'shop', uid: 'u-1', labels: { 'kubewasm.dev/copy': 'true' } },
  data: { color: 'blue' },
});

beforeEach(() => reset()); // the fake host's objects and log lines, per test

test('an added ConfigMap gets an annotated copy, owned by it', () => {
  // Called as the host calls it: WIT event in, intents out (JSON bodies parsed).
  const { ok, err } = callHandle(handler, witEvent('added', original()), { suffix: 'backup' });
  assert.equal(err, undefined);
  assert.deepEqual(ok, [
    {
      tag: 'create',
      val: {
        object: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            name: 'app-config-backup',
            namespace: 'shop',
            annotations: { [COPIED_FROM]: 'shop/app-config' },
          },
          data: { color: 'blue' },
        },
        ownedByTrigger: true,
        force: false,
      },
    },
  ]);
  // The plugin's log lines, captured by the fake host.
  assert.deepEqual(takeLogs().map((l) => l.level), ['info']);
});

test('every intent stays inside the grants (the host would refuse it otherwise)', () => {
  const settings = Settings.decode({}); // an empty settings file: the defaults
  const manifest = handler.plugin.describe(settings);
  assert.equal(manifest.name, NAME);
  for (const intent of handler.plugin.handle(Event.of('added', original()), settings)) {
    assert.equal(permits(manifest, intent), undefined);
  }
});

test('a deleted ConfigMap needs nothing', () => {
  assert.deepEqual(callHandle(handler, witEvent('deleted', original())).ok, []);
});

test('the fake host serves reads from the objects it is given', () => {
  // What a plugin's `get`/`list` (from 'kubewasm') see: here, an existing copy.
  setObjects([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'app-config-copy', namespace: 'shop' } }]);
  assert.equal(get('v1', 'ConfigMap', 'shop', 'app-config-copy')?.metadata?.name, 'app-config-copy');
  assert.equal(get('v1', 'ConfigMap', 'shop', 'other'), null);
});
