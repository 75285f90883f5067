// check-entry.mjs: a plugin module without a `handler` export fails the build with one
// line naming the fix, before componentize-js runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { check, init } from '../check-entry.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const script = join(here, '..', 'check-entry.mjs');

function module(files) {
  const dir = mkdtempSync(join(tmpdir(), 'kw-check-'));
  for (const [name, source] of Object.entries(files)) writeFileSync(join(dir, name), source);
  return join(dir, 'index.js');
}

test('the ways to export handler pass', async () => {
  await init;
  for (const source of [
    'export const handler = definePlugin({});',
    'const h = {}; export { h as handler };',
    'export function handler() {}',
  ]) {
    assert.equal(check(module({ 'index.js': source })), null, source);
  }
  assert.equal(
    check(module({ 'index.js': "export * from './impl.js';", 'impl.js': 'export const handler = 1;' })),
    null,
  );
  assert.equal(check(join(here, '..', 'mongodb-monitor', 'index.js')), null);
});

test('a missing handler export names the fix in one line', () => {
  const file = module({ 'index.js': 'export const plugin = definePlugin({});\nexport default plugin;' });
  const run = spawnSync(process.execPath, [script, file], { encoding: 'utf8' });
  assert.equal(run.status, 1, run.stderr);
  const lines = run.stderr.trim().split('\n');
  assert.equal(lines.length, 1, run.stderr);
  assert.match(lines[0], /^error: .*index\.js: no `handler` export \(it has a default export/);
  assert.match(lines[0], /export const handler = definePlugin/);
  const ok = spawnSync(process.execPath, [script, join(here, '..', 'seldon-endpoint', 'index.js')], {
    encoding: 'utf8',
  });
  assert.equal(ok.status, 0, ok.stderr);
});
