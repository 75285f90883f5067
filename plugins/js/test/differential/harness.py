"""Loads a kubewasm plugin component with wasmtime-py (component API, WASI p2 linked with
nothing granted) and calls describe/handle; results come back as plain dicts/lists.
The host imports are served from `cluster` (get/list) and `logs`."""
import json, sys
import wasmtime
from wasmtime import component as C

engine = wasmtime.Engine()
_cache = {}

def to_py(v):
    if isinstance(v, C.Record):
        return {k: to_py(x) for k, x in v.__dict__.items()}
    if isinstance(v, C.Variant):
        return {"tag": v.tag, "val": to_py(v.payload)}
    if isinstance(v, list):
        return [to_py(x) for x in v]
    return v

def rec(**kw):
    r = C.Record()
    for k, v in kw.items():
        setattr(r, k.replace('_', '-'), v)
    return r

class Plugin:
    def __init__(self, path, cluster=()):
        self.logs = []
        self.cluster = list(cluster)
        if path not in _cache:
            _cache[path] = C.Component.from_file(engine, path)
        self.component = _cache[path]
        linker = C.Linker(engine)
        linker.add_wasip2()
        with linker.root() as root:
            with root.add_instance("kubewasm:plugin/host@0.2.0") as host:
                host.add_func("log", lambda store, level, msg: self.logs.append((level, msg)))
                host.add_func("get", self._get)
                host.add_func("list", self._list)
        self.store = wasmtime.Store(engine)
        self.store.set_wasi(wasmtime.WasiConfig())
        self.instance = linker.instantiate(self.store, self.component)
        idx = self.instance.get_export_index(self.store, "kubewasm:plugin/handler@0.2.0")
        self.f_describe = self.instance.get_func(self.store, self.instance.get_export_index(self.store, "describe", idx))
        self.f_handle = self.instance.get_func(self.store, self.instance.get_export_index(self.store, "handle", idx))

    def _match(self, o, av, kind, ns):
        md = o.get("metadata", {})
        return o.get("apiVersion") == av and o.get("kind") == kind and (ns is None or md.get("namespace") == ns)

    def _get(self, store, av, kind, ns, name):
        for o in self.cluster:
            if self._match(o, av, kind, ns) and o.get("metadata", {}).get("name") == name:
                return C.Variant("ok", json.dumps(o))
        return C.Variant("ok", None)

    def _list(self, store, av, kind, ns, sel):
        return [json.dumps(o) for o in self.cluster if self._match(o, av, kind, ns)]

    def describe(self, settings=None):
        r = self.f_describe(self.store, None if settings is None else json.dumps(settings))
        self.f_describe.post_return(self.store)
        return to_py(r)

    def handle(self, etype, watch, obj, old=None, settings=None):
        objtext = obj if isinstance(obj, str) else json.dumps(obj)
        oldtext = None if old is None else (old if isinstance(old, str) else json.dumps(old))
        ev = rec(event_type=etype, watch_id=watch, object=objtext, old_object=oldtext)
        r = self.f_handle(self.store, ev, None if settings is None else (settings if isinstance(settings, str) else json.dumps(settings)))
        self.f_handle.post_return(self.store)
        return to_py(r)

def normalize(result):
    """Parse JSON strings inside intents so comparisons ignore key order."""
    if isinstance(result, list):
        out = []
        for i in result:
            i = dict(i)
            val = dict(i["val"])
            for k in ("object", "body"):
                if k in val:
                    val[k] = json.loads(val[k])
            i["val"] = val
            out.append(i)
        return out
    return result

if __name__ == "__main__":
    p = Plugin(sys.argv[1])
    print(p.describe())
