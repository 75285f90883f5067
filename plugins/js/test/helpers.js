// Shared helpers: call a plugin's WIT exports the way the host does and read the results
// back as plain objects (JSON bodies parsed), so tests compare values, not text.

/**
 * @param {string} type
 * @param {unknown} object
 * @param {{ watchId?: string, oldObject?: unknown }} [options]
 */
export function witEvent(type, object, options = {}) {
  const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
  return {
    eventType: type,
    watchId: options.watchId ?? '',
    object: text(object),
    oldObject: options.oldObject === undefined ? undefined : text(options.oldObject),
  };
}

/** Parses the JSON text inside WIT intents. */
export function decodeIntents(list) {
  return list.map(({ tag, val }) => {
    const v = { ...val };
    if ('object' in v) v.object = JSON.parse(v.object);
    if ('body' in v) v.body = JSON.parse(v.body);
    return { tag, val: v };
  });
}

/**
 * Calls handler.handle as the host would: `{ ok }` or `{ err }`.
 * @param {{ handle: Function }} handler
 */
export function callHandle(handler, event, settings) {
  try {
    return { ok: decodeIntents(handler.handle(event, settings === undefined ? undefined : JSON.stringify(settings))) };
  } catch (err) {
    return { err };
  }
}

/**
 * Calls handler.describe as the host would: `{ ok }` or `{ err }`.
 * @param {{ describe: Function }} handler
 */
export function callDescribe(handler, settings) {
  try {
    return { ok: handler.describe(settings === undefined ? undefined : JSON.stringify(settings)) };
  } catch (err) {
    return { err };
  }
}
