"""Runs the same events through a Rust plugin and its JavaScript twin and compares the results.

Timestamps that the plugin made up ("now") are blanked; error messages only need the same retry
flag (texts are printed when they differ)."""
import json, os, re
import harness

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

TS = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$')

def norm(r):
    return json.loads(json.dumps(harness.normalize(r), sort_keys=True))

def blank_now(v, keep):
    """Replaces lastTransitionTime values that are not in the input (made up from the clock)."""
    if isinstance(v, dict):
        return {k: ("<now>" if k == "lastTransitionTime" and isinstance(x, str) and x not in keep and TS.match(x) else blank_now(x, keep)) for k, x in v.items()}
    if isinstance(v, list):
        return [blank_now(x, keep) for x in v]
    return v

def run(name, cases, describe_settings):
    rust = harness.Plugin(os.path.join(ROOT, "target", "plugins", "rust", f"{name}.wasm"))
    js = harness.Plugin(os.path.join(ROOT, "target", "plugins", "js", f"{name}.wasm"))
    fails = 0
    for s in describe_settings:
        a, b = rust.describe(s), js.describe(s)
        same = a == b if not isinstance(a, str) else isinstance(b, str)
        if not same:
            fails += 1
            print(f"DESCRIBE MISMATCH settings={s}\n  rust={a}\n  js  ={b}")
        elif isinstance(a, str) and a != b:
            print(f"describe err text differs settings={s}\n  rust={a}\n  js  ={b}")
    for label, args in cases:
        keep = set(re.findall(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', json.dumps(args)))
        outs = []
        for p in (rust, js):
            try:
                outs.append(blank_now(norm(p.handle(*args)), keep))
            except Exception as e:
                outs.append(f"EXC {e}")
        a, b = outs
        if isinstance(a, dict) and isinstance(b, dict):  # errors
            ok = a["retry"] == b["retry"]
            if ok and a["message"] != b["message"]:
                print(f"  note [{label}] error text: rust={a['message']!r} js={b['message']!r}")
        else:
            ok = a == b
        if not ok:
            fails += 1
            print(f"MISMATCH [{label}]\n  rust={json.dumps(a, sort_keys=True)}\n  js  ={json.dumps(b, sort_keys=True)}")
        else:
            print(f"ok [{label}] -> {len(a) if isinstance(a, list) else 'error'}")
    print(f"{name}: {fails} mismatches")
    return fails
