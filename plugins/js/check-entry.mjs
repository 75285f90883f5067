// Build-time check of a JavaScript plugin's module, before componentize-js runs.
//
// componentize-js exports the module's `handler` export as the WIT `handler` interface;
// without it the build fails deep inside the toolchain. This reads the module's exports
// statically (es-module-lexer, which componentize-js already depends on; the module is
// parsed, never run), follows `export * from './x.js'`, and when no `handler` is exported
// prints one line naming the fix and exits 1.
//
// Usage: node check-entry.mjs FILE.js   (exit 0: exports `handler`; 1: not, or unreadable)

import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { init, parse } from 'es-module-lexer';

const WANTED = 'handler';

/** Names FILE exports, following relative `export *` re-exports. */
function exportsOf(file, seen = new Set()) {
  if (seen.has(file)) return new Set();
  seen.add(file);
  const source = readFileSync(file, 'utf8');
  const [imports, exports] = parse(source, file);
  const names = new Set(exports.map((e) => e.n));
  for (const imp of imports) {
    const statement = source.slice(imp.ss, imp.se);
    if (imp.n && imp.n.startsWith('.') && /^export\s*\*\s*from/.test(statement)) {
      for (const n of exportsOf(resolve(dirname(file), imp.n), seen)) names.add(n);
    }
  }
  return names;
}

/** null when FILE exports `handler`; otherwise the one-line reason and fix. */
export function check(file) {
  let names;
  try {
    names = exportsOf(resolve(file));
  } catch (e) {
    const where = e.idx !== undefined ? ` (at offset ${e.idx})` : '';
    return `${file}: cannot read its exports${where}: ${e.message.split('\n')[0]}`;
  }
  if (names.has(WANTED)) return null;
  const other = names.has('default')
    ? ' (it has a default export: export it by name instead)'
    : '';
  return `${file}: no \`${WANTED}\` export${other}: add \`export const handler = definePlugin({ settings, describe, handle });\``;
}

const main = process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname);
if (main) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: node check-entry.mjs FILE.js');
    process.exit(2);
  }
  await init;
  const reason = check(file);
  if (reason) {
    console.error(`error: ${reason}`);
    process.exit(1);
  }
}

export { init };
