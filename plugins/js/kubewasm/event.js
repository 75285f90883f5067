// @ts-check
/** Events: one change to one object, as the host delivers it. */

import { errorText, permanent } from './errors.js';
import { isObject } from './object.js';

/** @typedef {import('./object.js').KubeObject} KubeObject */

/** @typedef {'added' | 'modified' | 'deleted' | 'resync'} EventType */

/**
 * @param {string} text
 * @param {string} what
 */
function parseObject(text, what) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw permanent(`${what} is not valid JSON: ${errorText(e)}`);
  }
  if (!isObject(v)) throw permanent(`${what} is not a JSON object`);
  return v;
}

/** One change to one object, as the host delivers it. Objects are parsed on first access. */
export class Event {
  /**
   * @param {EventType} type
   * @param {string} watchId
   * @param {string} rawObject
   * @param {string} [rawOldObject]
   */
  constructor(type, watchId, rawObject, rawOldObject) {
    /** Why `handle` was called. */
    this.type = type;
    /** The id of the watch that matched. */
    this.watchId = watchId;
    /** The object as the JSON text the host sent. */
    this.rawObject = rawObject;
    /** The previous object's JSON text (`modified` only). */
    this.rawOldObject = rawOldObject ?? undefined;
    /** @type {KubeObject | undefined} */
    this._object = undefined;
    /** @type {KubeObject | null | undefined} */
    this._old = undefined;
  }

  /**
   * An event from plain objects; handy in tests.
   * @param {EventType} type
   * @param {unknown} object
   * @param {{ watchId?: string, oldObject?: unknown }} [options]
   */
  static of(type, object, options = {}) {
    const text = (/** @type {unknown} */ v) => (typeof v === 'string' ? v : JSON.stringify(v));
    return new Event(
      type,
      options.watchId ?? '',
      text(object),
      options.oldObject === undefined ? undefined : text(options.oldObject),
    );
  }

  get isAdded() { return this.type === 'added'; }
  get isModified() { return this.type === 'modified'; }
  get isDeleted() { return this.type === 'deleted'; }
  get isResync() { return this.type === 'resync'; }

  /**
   * The object, parsed. A permanent error unless it is a JSON object.
   * @returns {KubeObject}
   */
  get object() {
    if (this._object === undefined) this._object = parseObject(this.rawObject, 'object');
    return this._object;
  }

  /**
   * The previous object of a `modified` event, parsed; `null` when there is none.
   * @returns {KubeObject | null}
   */
  get oldObject() {
    if (this._old === undefined) {
      this._old = this.rawOldObject === undefined ? null : parseObject(this.rawOldObject, 'old object');
    }
    return this._old;
  }
}
