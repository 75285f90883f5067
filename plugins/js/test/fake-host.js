// A stand-in for the host imports when plugins run under node (tests): the same functions,
// with the componentize-js calling conventions (option = undefined, result err = throw).

/** @type {{ level: string, message: string }[]} */
let logs = [];
/** @type {Record<string, any>[]} */
let objects = [];
/** @type {string | undefined} */
let failWith;

/** Objects served to get/list. @param {Record<string, any>[]} list */
export function setObjects(list) {
  objects = list;
}

/** Makes get/list fail with this message (undefined: succeed). @param {string | undefined} msg */
export function setFailure(msg) {
  failWith = msg;
}

/** The log lines since the last call. */
export function takeLogs() {
  const out = logs;
  logs = [];
  return out;
}

/** @param {string} level @param {string} message */
export function log(level, message) {
  logs.push({ level, message });
}

function matches(o, apiVersion, kind, namespace) {
  return (
    o.apiVersion === apiVersion &&
    o.kind === kind &&
    (namespace === undefined || o.metadata?.namespace === namespace)
  );
}

function selected(o, selector) {
  if (selector === undefined) return true;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    return o.metadata?.labels?.[k] === v;
  });
}

export function get(apiVersion, kind, namespace, name) {
  if (failWith !== undefined) throw { payload: failWith };
  const o = objects.find((x) => matches(x, apiVersion, kind, namespace) && x.metadata?.name === name);
  return o === undefined ? undefined : JSON.stringify(o);
}

export function list(apiVersion, kind, namespace, labelSelector) {
  if (failWith !== undefined) throw { payload: failWith };
  return objects
    .filter((x) => matches(x, apiVersion, kind, namespace) && selected(x, labelSelector))
    .map((x) => JSON.stringify(x));
}
