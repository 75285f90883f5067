// @ts-check
/**
 * A stand-in for the host imports when plugins run under node (tests): the same functions,
 * with the componentize-js calling conventions (option = undefined, result err = throw).
 * Tests feed it with setObjects and read the plugin's log lines with takeLogs.
 */

/** @typedef {Record<string, any>} KubeObject */
/** @typedef {{ level: string, message: string }} LogLine */

/** @type {LogLine[]} */
let logs = [];
/** @type {KubeObject[]} */
let objects = [];
/** @type {string | undefined} */
let failWith;

/** Objects served to get/list (replacing the previous ones). @param {KubeObject[]} list */
export function setObjects(list) {
  objects = list;
}

/** Makes get/list fail with this message (undefined: succeed). @param {string | undefined} msg */
export function setFailure(msg) {
  failWith = msg;
}

/** The log lines since the last call. @returns {LogLine[]} */
export function takeLogs() {
  const out = logs;
  logs = [];
  return out;
}

/** Forgets the objects, the failure and the log lines (e.g. in a `beforeEach`). */
export function reset() {
  objects = [];
  failWith = undefined;
  logs = [];
}

/** @param {string} level @param {string} message */
export function log(level, message) {
  logs.push({ level, message });
}

/**
 * @param {KubeObject} o
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | undefined} namespace
 */
function matches(o, apiVersion, kind, namespace) {
  return (
    o.apiVersion === apiVersion &&
    o.kind === kind &&
    (namespace === undefined || o.metadata?.namespace === namespace)
  );
}

/** Equality terms only (`k=v,k2=v2`), as the tests need. @param {KubeObject} o @param {string | undefined} selector */
function selected(o, selector) {
  if (selector === undefined) return true;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    return o.metadata?.labels?.[k] === v;
  });
}

/**
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | undefined} namespace
 * @param {string} name
 * @returns {string | undefined}
 */
export function get(apiVersion, kind, namespace, name) {
  if (failWith !== undefined) throw { payload: failWith };
  const o = objects.find((x) => matches(x, apiVersion, kind, namespace) && x.metadata?.name === name);
  return o === undefined ? undefined : JSON.stringify(o);
}

/**
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | undefined} namespace
 * @param {string | undefined} labelSelector
 * @returns {string[]}
 */
export function list(apiVersion, kind, namespace, labelSelector) {
  if (failWith !== undefined) throw { payload: failWith };
  return objects
    .filter((x) => matches(x, apiVersion, kind, namespace) && selected(x, labelSelector))
    .map((x) => JSON.stringify(x));
}
