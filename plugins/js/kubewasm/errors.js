// @ts-check
/**
 * Errors of a `handle` call: permanent (the event is dropped) or retryable (the host retries
 * it with backoff).
 */

/**
 * A failed `handle` call. `retry: true` asks the host to retry the event with backoff;
 * `retry: false` drops it (malformed objects, invalid settings).
 */
export class HandleError extends Error {
  /**
   * @param {string} message
   * @param {boolean} retry
   */
  constructor(message, retry) {
    super(message);
    this.name = 'HandleError';
    this.retry = retry;
  }
}

/**
 * A permanent error (the event is dropped): `throw permanent('spec.x must be set')`.
 * @param {string} message
 */
export function permanent(message) {
  return new HandleError(message, false);
}

/**
 * A transient error (the host retries the event with backoff).
 * @param {string} message
 */
export function retryable(message) {
  return new HandleError(message, true);
}

/**
 * The text of anything thrown: a componentize-js ComponentError's payload, an Error's
 * message, else the value as a string.
 * @param {unknown} e
 */
export function errorText(e) {
  // A plain (non-array) object with a payload: componentize-js's ComponentError.
  if (typeof e === 'object' && e !== null && !Array.isArray(e) && 'payload' in e) {
    return String(e.payload);
  }
  if (e instanceof Error) return e.message;
  return String(e);
}
