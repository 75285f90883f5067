// Module resolution hook (see setup.mjs).
const FAKE_HOST = new URL('./fake-host.js', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier === 'kubewasm:plugin/host@0.1.0') {
    return { url: FAKE_HOST, shortCircuit: true };
  }
  return next(specifier, context);
}
