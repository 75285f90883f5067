// @ts-check
/** The plugin: `definePlugin` wires a definition to the WIT exports. */

import { DecodeError } from './schema.js';
import { HandleError, errorText, permanent } from './errors.js';
import { Event } from './event.js';
import { validateManifest } from './manifest.js';
import { toWitIntent, toWitManifest } from './wit.js';

/**
 * @typedef {import('./event.js').EventType} EventType
 * @typedef {import('./manifest.js').Manifest} Manifest
 * @typedef {import('./intents.js').Intent} Intent
 */

/**
 * @template S
 * @typedef {object} PluginDefinition
 * @property {import('./schema.js').Type<S> | ((json: unknown) => S)} [settings]
 *   How to read the settings file (`NAME.yaml` beside the .wasm, as JSON): a `t.object(...)`
 *   decoder, or a function of the parsed JSON (`undefined` when there is no file). Default:
 *   the parsed JSON as is.
 * @property {(settings: S) => Manifest} describe
 *   What the plugin watches and may write. Throw (anything) to reject the plugin.
 * @property {(event: Event, settings: S) => Intent[]} handle
 *   The writes for one event. `throw permanent(..)` / `throw retryable(..)` to fail.
 */

/**
 * Parses the settings text the host passes: none, empty or `null` → `undefined` JSON.
 * @template S
 * @param {PluginDefinition<S>['settings']} decoder
 * @param {string | undefined} text
 * @returns {S}
 */
function readSettings(decoder, text) {
  const trimmed = text == null ? '' : text.trim();
  let json;
  if (trimmed !== '' && trimmed !== 'null') {
    try {
      json = JSON.parse(trimmed);
    } catch (e) {
      throw new Error(`invalid settings: ${errorText(e)}`);
    }
  }
  try {
    if (!decoder) return /** @type {S} */ (json);
    if (typeof decoder === 'function') return decoder(json);
    return json === undefined ? decoder.makeDefault() : decoder.decode(json);
  } catch (e) {
    throw new Error(`invalid settings: ${errorText(e)}`);
  }
}

/**
 * Turns anything thrown into the WIT `handle-error` record. A `HandleError` keeps its retry
 * flag; a thrown string or DecodeError is permanent; anything else (a bug: TypeError, …) is
 * retried, like a trap in a Rust plugin.
 * @param {unknown} e
 */
export function toHandleError(e) {
  if (e instanceof HandleError) return { message: e.message, retry: e.retry };
  if (typeof e === 'string') return { message: e, retry: false };
  if (e instanceof DecodeError) return { message: e.message, retry: false };
  if (e instanceof Error) return { message: `${e.name}: ${e.message}`, retry: true };
  return { message: String(e), retry: true };
}

/** What `definePlugin` has cached before its first call: matches no settings text. */
const NOT_CACHED = Symbol('not cached');

/**
 * Wires a plugin to the WIT exports. Export the result as `handler`:
 * `export const handler = definePlugin({ settings, describe, handle })`.
 * @template S
 * @param {PluginDefinition<S>} plugin
 */
export function definePlugin(plugin) {
  // The host passes the same settings text on every call of an instance, so `handle` decodes
  // it once and keeps the result (or the error) for as long as the text stays the same.
  // Plugins get the same settings object on every call: treat it as read-only.
  /** @type {unknown} */
  let cachedText = NOT_CACHED;
  /** @type {{ settings: S } | { error: string }} */
  let cached = { error: 'settings not decoded' };
  /** @param {string | undefined} text */
  const settingsFor = (text) => {
    if (text !== cachedText) {
      try {
        cached = { settings: readSettings(plugin.settings, text) };
      } catch (e) {
        cached = { error: errorText(e) };
      }
      cachedText = text;
    }
    if ('error' in cached) throw permanent(cached.error);
    return cached.settings;
  };
  return {
    /**
     * WIT `describe(settings: option<string>) -> result<manifest, string>`.
     * @param {string | undefined} settingsText
     */
    describe(settingsText) {
      let m;
      try {
        const settings = readSettings(plugin.settings, settingsText);
        m = plugin.describe(settings);
        const problem = validateManifest(m);
        if (problem) throw new Error(problem);
        return toWitManifest(m);
      } catch (e) {
        // A thrown string is the `err` case of the result.
        throw e instanceof Error ? e.message : String(e);
      }
    },

    /**
     * WIT `handle(event, settings: option<string>) -> result<list<intent>, handle-error>`.
     * @param {{ eventType: EventType, watchId: string, object: string, oldObject?: string }} witEvent
     * @param {string | undefined} settingsText
     */
    handle(witEvent, settingsText) {
      try {
        const settings = settingsFor(settingsText);
        const event = new Event(witEvent.eventType, witEvent.watchId, witEvent.object, witEvent.oldObject);
        const intents = plugin.handle(event, settings) ?? [];
        return intents.map(toWitIntent);
      } catch (e) {
        // componentize-js turns a thrown record into the `err` case.
        throw toHandleError(e);
      }
    },

    /** The definition, for tests. */
    plugin,
  };
}
