// Types of the WIT host interface as componentize-js exposes it to JavaScript
// (`import { log, get, list } from 'kubewasm:plugin/host@0.2.0'`), for editors.
// option<T> is `T | undefined`; an `err` result is thrown (the error's `payload` is the string).
declare module 'kubewasm:plugin/host@0.2.0' {
  export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
  export function log(level: LogLevel, message: string): void;
  export function get(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
  ): string | undefined;
  /** The WIT name is `%list` (an escaped keyword); JavaScript sees `list`. */
  export function list(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    labelSelector: string | undefined,
  ): string[];
}
