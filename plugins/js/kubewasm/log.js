// @ts-check
/// <reference path="./wit-host.d.ts" />
/** Logging through the host. */

import * as host from 'kubewasm:plugin/host@0.2.0';

/** @typedef {'trace' | 'debug' | 'info' | 'warn' | 'error'} LogLevel */

/**
 * Lines go to the host's log, tagged with the plugin and the object being handled.
 * (`console.log` goes nowhere: the host links stdout to nothing.)
 */
export const log = {
  /** @param {string} message */
  trace: (message) => host.log('trace', String(message)),
  /** @param {string} message */
  debug: (message) => host.log('debug', String(message)),
  /** @param {string} message */
  info: (message) => host.log('info', String(message)),
  /** @param {string} message */
  warn: (message) => host.log('warn', String(message)),
  /** @param {string} message */
  error: (message) => host.log('error', String(message)),
};
