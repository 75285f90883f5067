// @ts-check
/**
 * Call a plugin's WIT exports the way the host does and read the results back as plain
 * objects (JSON bodies parsed), so tests compare values, not text.
 */

/**
 * An event as the host passes it to `handle` (objects as JSON text).
 * @param {string} type 'added' | 'modified' | 'deleted' | 'resync'
 * @param {unknown} object
 * @param {{ watchId?: string, oldObject?: unknown }} [options]
 */
export function witEvent(type, object, options = {}) {
  /** @param {unknown} v */
  const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
  return {
    eventType: type,
    watchId: options.watchId ?? '',
    object: text(object),
    oldObject: options.oldObject === undefined ? undefined : text(options.oldObject),
  };
}

/**
 * Parses the JSON text inside WIT intents.
 * @param {{ tag: string, val: Record<string, any> }[]} list
 */
export function decodeIntents(list) {
  return list.map(({ tag, val }) => {
    const v = { ...val };
    if ('object' in v) v.object = JSON.parse(v.object);
    if ('body' in v) v.body = JSON.parse(v.body);
    return { tag, val: v };
  });
}

/**
 * Calls handler.handle as the host would: `{ ok }` (intents, JSON parsed) or `{ err }`.
 * @param {{ handle: Function }} handler
 * @param {ReturnType<typeof witEvent>} event
 * @param {unknown} [settings] the settings file's content (undefined: no file)
 * @returns {{ ok?: any[], err?: any }}
 */
export function callHandle(handler, event, settings) {
  try {
    return { ok: decodeIntents(handler.handle(event, settings === undefined ? undefined : JSON.stringify(settings))) };
  } catch (err) {
    return { err };
  }
}

/**
 * Calls handler.describe as the host would: `{ ok }` (the manifest) or `{ err }`.
 * @param {{ describe: Function }} handler
 * @param {unknown} [settings] the settings file's content (undefined: no file)
 * @returns {{ ok?: any, err?: any }}
 */
export function callDescribe(handler, settings) {
  try {
    return { ok: handler.describe(settings === undefined ? undefined : JSON.stringify(settings)) };
  } catch (err) {
    return { err };
  }
}
