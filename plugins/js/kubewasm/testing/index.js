// @ts-check
/**
 * Test helpers for plugins under node (`import { ... } from 'kubewasm/testing'`): the fake
 * host's controls and the calls-as-the-host-makes-them helpers. Run the tests with
 * `node --import kubewasm/testing/register --test`, so the layer's host import resolves to
 * the fake host (register.js).
 */
export { setObjects, setFailure, takeLogs, reset } from './fake-host.js';
export { witEvent, decodeIntents, callHandle, callDescribe } from './helpers.js';
