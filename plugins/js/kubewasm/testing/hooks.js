// @ts-check
/**
 * Module resolution hook (registered by register.js): the component's `kubewasm:` imports
 * resolve to the fake host, every other specifier as node resolves it.
 */
const FAKE_HOST = new URL('./fake-host.js', import.meta.url).href;
const HOST_INTERFACE = 'kubewasm:plugin/host@0.2.0';

/**
 * @param {string} specifier
 * @param {object} context
 * @param {(specifier: string, context: object) => unknown} next
 */
export async function resolve(specifier, context, next) {
  if (specifier === HOST_INTERFACE) {
    return { url: FAKE_HOST, shortCircuit: true };
  }
  if (specifier.startsWith('kubewasm:')) {
    throw new Error(
      `${specifier}: not an interface of this kubewasm (the host interface is ${HOST_INTERFACE})`,
    );
  }
  return next(specifier, context);
}
