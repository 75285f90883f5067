// @ts-check
/**
 * Lets plugin code run under node (unit tests): the layer imports the WIT host interface
 * `kubewasm:plugin/host@0.2.0`, which only exists inside the component, so this registers a
 * module hook (hooks.js) resolving it to the fake host in fake-host.js.
 *
 *   node --import kubewasm/testing/register --test          (a project's `npm test`)
 *   node --import ./kubewasm/testing/register.js --test ... (this repository's plugins/js)
 *
 * Never imported by a plugin: it is not part of any component.
 */
// @ts-ignore -- node's own module: the layer typechecks without @types/node (a project's tests add them)
import { register } from 'node:module';

register('./hooks.js', import.meta.url);
