/*
 * A native stress test of the C layer under AddressSanitizer, LeakSanitizer and UBSan: it
 * compiles a plugin, the layer and the generated bindings for the host machine, stubs the
 * host imports, and calls the exported describe/handle wrappers (and their post-return
 * functions) the way the canonical ABI does, many times, with valid, malformed and
 * edge-case inputs. Run it with plugins/c/tests/sanitize.sh (after plugins/c/build.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
void __wasm_import_kubewasm_plugin_host_log(int32_t l, uint8_t *p, size_t n) { (void)l; (void)p; (void)n; }
void __wasm_import_kubewasm_plugin_host_get(uint8_t *a, size_t b, uint8_t *c, size_t d, int32_t e, uint8_t *f, size_t g, uint8_t *h, size_t i, uint8_t *ret) { memset(ret, 0, 32); }
void __wasm_import_kubewasm_plugin_host_list(uint8_t *a, size_t b, uint8_t *c, size_t d, int32_t e, uint8_t *f, size_t g, int32_t h, uint8_t *i, size_t j, uint8_t *ret) { memset(ret, 0, 32); }
void __component_type_object_force_link_plugin(void) {}
uint8_t *__wasm_export_exports_kubewasm_plugin_handler_handle(int32_t arg, uint8_t * arg0, size_t arg1, uint8_t * arg2, size_t arg3, int32_t arg4, uint8_t * arg5, size_t arg6, int32_t arg7, uint8_t * arg8, size_t arg9);
void __wasm_export_exports_kubewasm_plugin_handler_handle_post_return(uint8_t * arg0);
uint8_t *__wasm_export_exports_kubewasm_plugin_handler_describe(int32_t, uint8_t *, size_t);
void __wasm_export_exports_kubewasm_plugin_handler_describe_post_return(uint8_t * arg0);
static uint8_t *dup(const char *s) { size_t n = strlen(s); uint8_t *p = malloc(n ? n : 1); memcpy(p, s, n); return p; }
int main(int argc, char **argv) {
    (void)argv;
    const char *objs[] = {
      "{\"apiVersion\":\"sites.kubewasm.dev/v1alpha1\",\"kind\":\"ContentSite\",\"metadata\":{\"name\":\"blog\",\"namespace\":\"web\",\"uid\":\"u\",\"generation\":2},\"spec\":{\"database\":{\"members\":1}},\"status\":{\"conditions\":[{\"type\":\"Provisioned\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}",
      "{\"apiVersion\":\"mongodb.com/v1\",\"kind\":\"MongoDB\",\"metadata\":{\"name\":\"orders\",\"namespace\":\"shop\"}}",
      "{oops", "{\"apiVersion\":\"v1\",\"kind\":\"X\",\"metadata\":{\"name\":\"a\\u0000b\",\"namespace\":\"n\"}}",
      "{\"apiVersion\":\"sites.kubewasm.dev/v1alpha1\",\"kind\":\"ContentSite\",\"metadata\":{\"name\":\"blog\",\"namespace\":\"web\"},\"spec\":{\"database\":{\"members\":\"x\"}}}",
      "{\"apiVersion\":\"machinelearning.seldon.io/v1\",\"kind\":\"SeldonDeployment\",\"metadata\":{\"name\":\"iris\",\"namespace\":\"ml\"},\"spec\":{\"predictors\":[{\"name\":\"main\"}]},\"status\":{\"state\":\"Available\"}}",
    };
    const int n_objs = (int)(sizeof objs / sizeof objs[0]);
    const char *settings[] = {NULL, "{\"labels\":{\"a\":\"b\"},\"database\":{\"members\":2}}", "{\"bad\":1}", "{\"labels\":{\"a\":\"b\"}}", "{\"database\":{\"members\":2}}"};
    for (int round = 0; round < 2000; round++) {
        for (int o = 0; o < n_objs; o++) for (int s = 0; s < 5; s++) {
            const char *obj = objs[o], *set = settings[s];
            uint8_t *r = __wasm_export_exports_kubewasm_plugin_handler_handle(round % 4, dup("w"), 1, dup(obj), strlen(obj), round % 4 == 1, round % 4 == 1 ? dup(obj) : NULL, round % 4 == 1 ? strlen(obj) : 0, set != NULL, set ? dup(set) : NULL, set ? strlen(set) : 0);
            if (round == 0 && argc > 1) printf("o%d s%d -> is_err=%d len=%zu\n", o, s, r[0], *(size_t*)(r + 16));
            __wasm_export_exports_kubewasm_plugin_handler_handle_post_return(r);
        }
        for (int s = 0; s < 5; s++) {
            const char *set = settings[s];
            uint8_t *r = __wasm_export_exports_kubewasm_plugin_handler_describe(set != NULL, set ? dup(set) : NULL, set ? strlen(set) : 0);
            __wasm_export_exports_kubewasm_plugin_handler_describe_post_return(r);
        }
    }
    puts("done");
    return 0;
}
