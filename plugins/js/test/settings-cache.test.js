import { test } from 'node:test';
import assert from 'node:assert/strict';

import * as kw from '../kubewasm/index.js';
import { witEvent } from '../kubewasm/testing/index.js';

// `definePlugin` decodes the settings once per settings text: these check that the cache
// follows the text (a new text is decoded again, an error stays an error) and that the
// decoder does not run again for the same text.
test('settings are decoded once per settings text, errors included', () => {
  let decodes = 0;
  const seen = [];
  const handler = kw.definePlugin({
    settings: (json) => {
      decodes += 1;
      if (json && json.bad) throw new Error('bad setting');
      return { suffix: json?.suffix ?? 'copy' };
    },
    describe: () => kw.manifest('p', '0.1.0', { watches: [kw.watchKind('w', 'v1', 'ConfigMap')] }),
    handle: (_event, settings) => {
      seen.push(settings.suffix);
      return [];
    },
  });
  const ev = witEvent('added', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } });
  handler.handle(ev, '{"suffix":"x"}');
  handler.handle(ev, '{"suffix":"x"}');
  assert.equal(decodes, 1);
  handler.handle(ev, '{"suffix":"y"}');
  handler.handle(ev, undefined);
  handler.handle(ev, undefined);
  assert.equal(decodes, 3);
  assert.deepEqual(seen, ['x', 'x', 'y', 'copy', 'copy']);
  for (let i = 0; i < 2; i++) {
    assert.throws(
      () => handler.handle(ev, '{"bad":true}'),
      (e) => e.retry === false && e.message === 'invalid settings: bad setting',
    );
  }
  assert.equal(decodes, 4);
  assert.throws(() => handler.handle(ev, '{'), (e) => e.retry === false && /^invalid settings: /.test(e.message));
});

test('pointers parsed once still follow RFC 6901 on every call', () => {
  for (let i = 0; i < 2; i++) {
    assert.equal(kw.at({ 'a/b': { '~': [5, 6] } }, '/a~1b/~0/1'), 6);
    assert.equal(kw.at([7], '/0'), 7);
    assert.equal(kw.at([7], '/00'), undefined);
    assert.equal(kw.at({ constructor: 1 }, '/toString'), undefined);
    assert.equal(kw.at({ a: null }, '/a'), null);
    assert.equal(kw.at({ a: null }, '/a/b'), undefined);
    assert.equal(kw.nameOf([{ metadata: { name: 'x' } }]), undefined);
    assert.equal(kw.nameOf({ metadata: Object.create({ name: 'inherited' }) }), undefined);
  }
});
