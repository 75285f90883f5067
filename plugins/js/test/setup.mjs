// Loaded with `node --import ./test/setup.mjs --test test/`: lets the layer and the plugins
// import the WIT host interface (`kubewasm:plugin/host@0.1.0`) outside a component, by
// resolving it to the fake host in fake-host.js.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
