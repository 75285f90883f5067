// @ts-check
/// <reference path="./wit-host.d.ts" />
/** Reading the host's caches: `get` and `list`. */

import * as host from 'kubewasm:plugin/host@0.2.0';
import { errorText, retryable } from './errors.js';

/** @typedef {import('./object.js').KubeObject} KubeObject */

/**
 * @param {string} text
 * @param {string} kind
 */
function parseFromHost(text, kind) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw retryable(`host returned invalid JSON for ${kind}: ${errorText(e)}`);
  }
}

/**
 * One object from the host's cache, or `null` when there is none. The kind must be
 * watched or declared in the manifest's `reads`; host errors are retryable.
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | null | undefined} namespace
 * @param {string} name
 * @returns {KubeObject | null}
 */
export function get(apiVersion, kind, namespace, name) {
  let text;
  try {
    text = host.get(apiVersion, kind, namespace ?? undefined, name);
  } catch (e) {
    throw retryable(`host.get ${kind} ${name}: ${errorText(e)}`);
  }
  return text == null ? null : parseFromHost(text, kind);
}

/**
 * The objects of a kind from the host's cache, in one namespace or all, optionally
 * filtered by a label selector (`app=web`). Host errors are retryable.
 * @param {string} apiVersion
 * @param {string} kind
 * @param {string | null} [namespace]
 * @param {string | null} [labelSelector]
 * @returns {KubeObject[]}
 */
export function list(apiVersion, kind, namespace, labelSelector) {
  let texts;
  try {
    // The WIT function is `%list` (an escaped keyword); componentize-js names it `list`.
    texts = host.list(apiVersion, kind, namespace ?? undefined, labelSelector ?? undefined);
  } catch (e) {
    throw retryable(`host.list ${kind}: ${errorText(e)}`);
  }
  return texts.map((s) => parseFromHost(s, kind));
}
