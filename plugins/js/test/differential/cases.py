"""Differential test cases: Rust plugin vs JavaScript twin. See README.md beside this file."""
import copy, json, sys
from compare import run

def site(**kw):
    s = {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
         "metadata": {"name": "blog", "namespace": "web", "uid": "u-1", "generation": 2},
         "spec": {"title": "Blog", "database": {"members": 1}}}
    s.update(kw)
    return s

def mod(o, path, val):
    o = copy.deepcopy(o)
    cur = o
    for k in path[:-1]:
        cur = cur.setdefault(k, {})
    if val is DEL:
        cur.pop(path[-1], None)
    else:
        cur[path[-1]] = val
    return o
DEL = object()

W = "sites"
S1 = {"database": {"members": 7, "version": "6.0.5"}, "service": {"port": 8080, "targetPort": 3000}}
cs_cases = [
    ("added", ("added", W, site())),
    ("added settings", ("added", W, site(), None, S1)),
    ("added settings file", ("added", W, site(), None, {"database": {"type": "ReplicaSet", "members": 1, "version": "7.0.12"}, "service": {"port": 80, "targetPort": 8080}})),
    ("no database section", ("added", W, mod(site(), ["spec"], {"title": "x"}), None, S1)),
    ("database null", ("added", W, mod(site(), ["spec", "database"], None))),
    ("database partial nulls", ("added", W, mod(site(), ["spec", "database"], {"members": None, "type": "Standalone", "extra": 1}))),
    ("modified", ("modified", W, mod(site(), ["spec", "database"], {"members": 5, "version": "8.0.0", "type": "Standalone"}), site())),
    ("resync", ("resync", W, site())),
    ("deleted", ("deleted", W, site())),
    ("deleted malformed", ("deleted", W, "{oops")),
    ("deleting", ("modified", W, mod(site(), ["metadata", "deletionTimestamp"], "2026-01-01T00:00:00Z"), site())),
    ("deleting null ts", ("added", W, mod(site(), ["metadata", "deletionTimestamp"], None))),
    ("deleting wrong kind", ("added", W, {"apiVersion": "v1", "kind": "X", "metadata": {"deletionTimestamp": "x"}})),
    ("cond same", ("resync", W, site(status={"conditions": [{"type": "Provisioned", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))),
    ("cond flipped", ("resync", W, site(status={"conditions": [{"type": "Provisioned", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))),
    ("cond same no time", ("resync", W, site(status={"conditions": [{"type": "Provisioned", "status": "True"}]}))),
    ("cond other", ("resync", W, site(status={"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))),
    ("no generation", ("added", W, mod(site(), ["metadata", "generation"], DEL))),
    ("float generation", ("added", W, mod(site(), ["metadata", "generation"], 2.5))),
    ("string generation", ("added", W, mod(site(), ["metadata", "generation"], "2"))),
    ("empty namespace", ("added", W, mod(site(), ["metadata", "namespace"], ""))),
    ("namespace setting", ("added", W, site(), None, {"namespace": "web"})),
    ("bad json", ("added", W, "{oops")),
    ("array json", ("added", W, "[1]")),
    ("no name", ("added", W, mod(site(), ["metadata", "name"], DEL))),
    ("empty name", ("added", W, mod(site(), ["metadata", "name"], ""))),
    ("no ns", ("added", W, mod(site(), ["metadata", "namespace"], DEL))),
    ("wrong kind", ("added", W, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}})),
    ("members string", ("added", W, mod(site(), ["spec", "database", "members"], "three"))),
    ("members 0", ("added", W, mod(site(), ["spec", "database", "members"], 0))),
    ("members -1", ("added", W, mod(site(), ["spec", "database", "members"], -1))),
    ("members float", ("added", W, mod(site(), ["spec", "database", "members"], 1.5))),
    ("database string", ("added", W, mod(site(), ["spec", "database"], "big"))),
    ("settings members 0 site none", ("added", W, mod(site(), ["spec", "database"], DEL), None, {"database": {"members": 0}})),
    ("bad settings", ("added", W, site(), None, {"datbase": {}})),
    ("bad settings nested", ("added", W, site(), None, {"database": {"member": 1}})),
    ("bad settings type", ("added", W, site(), None, {"service": {"port": "80"}})),
    ("settings null field", ("added", W, site(), None, {"namespace": None})),
    ("settings null struct", ("added", W, site(), None, {"database": None})),
    ("settings text null", ("added", W, site(), None, "null")),
    ("settings text empty", ("added", W, site(), None, "  ")),
    ("settings not json", ("added", W, site(), None, "{x")),
]
cs_describe = [None, {"namespace": "web"}, {"datbase": 1}, S1, {"service": {"port": 1.5}}, {"namespace": None}, "null"]

def db(**kw):
    d = {"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
         "metadata": {"name": "orders", "namespace": "shop", "uid": "u-9"},
         "spec": {"type": "ReplicaSet", "members": 3, "version": "7.0.12"}}
    d.update(kw)
    return d
M = "mongodbs"
mm_cases = [
    ("added", ("added", M, db())),
    ("added settings", ("added", M, db(), None, {"labels": {"release": "prometheus"}, "interval": "15s"})),
    ("labels override", ("added", M, db(), None, {"labels": {"app": "zzz", "app.kubernetes.io/managed-by": "me", "x": "y"}})),
    ("modified", ("modified", M, mod(db(), ["spec", "members"], 5), db())),
    ("resync", ("resync", M, db())),
    ("deleted", ("deleted", M, db())),
    ("deleting", ("modified", M, mod(db(), ["metadata", "deletionTimestamp"], "2026-01-01T00:00:00Z"), db())),
    ("bad json", ("added", M, "not json")),
    ("no name", ("added", M, {"apiVersion": "mongodb.com/v1", "kind": "MongoDB", "metadata": {"namespace": "x"}})),
    ("no ns", ("added", M, {"apiVersion": "mongodb.com/v1", "kind": "MongoDB", "metadata": {"name": "x"}})),
    ("wrong kind", ("added", M, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "y"}})),
    ("bad interval in handle", ("added", M, db(), None, {"interval": "soon"})),
    ("bad settings", ("added", M, db(), None, {"intervall": "30s"})),
    ("labels non string", ("added", M, db(), None, {"labels": {"a": 1}})),
    ("port setting", ("added", M, db(), None, {"port": "web", "namespace": "shop"})),
]
mm_describe = [None, {"interval": "1m30s"}, {"interval": "soon"}, {"intervall": "30s"}, {"namespace": "other"}, {"port": ""}, {"labels": {"release": "p"}}, {"interval": "30s1m"}, {"interval": "0"}]

def sd(state=None, **kw):
    v = {"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
         "metadata": {"name": "iris", "namespace": "models", "uid": "u-3"},
         "spec": {"predictors": [{"name": "main", "graph": {"name": "classifier"}, "replicas": 1}]}}
    if state is not None:
        v["status"] = {"state": state}
    v.update(kw)
    return v
SW = "seldondeployments"
A = sd("Available")
sd_cases = [
    ("creating->available", ("modified", SW, A, sd("Creating"))),
    ("added available", ("added", SW, A)),
    ("resync available", ("resync", SW, A)),
    ("added creating", ("added", SW, sd("Creating"))),
    ("added no status", ("added", SW, sd())),
    ("none->available", ("modified", SW, A, sd())),
    ("failed->available", ("modified", SW, A, sd("Failed"))),
    ("available->available", ("modified", SW, A, A)),
    ("available->failed", ("modified", SW, sd("Failed"), A)),
    ("modified no old", ("modified", SW, A)),
    ("deleted", ("deleted", SW, A)),
    ("deleting", ("modified", SW, mod(A, ["metadata", "deletionTimestamp"], "2026-01-01T00:00:00Z"), sd("Creating"))),
    ("settings", ("added", SW, A, None, {"domain": "ml.corp", "ingressClassName": "nginx", "servicePort": 9000})),
    ("settings empty class", ("added", SW, A, None, {"ingressClassName": ""})),
    ("no predictors", ("added", SW, mod(A, ["spec", "predictors"], []))),
    ("no spec", ("added", SW, mod(A, ["spec"], DEL))),
    ("predictor no name", ("added", SW, mod(A, ["spec", "predictors"], [{"graph": {}}, {"name": "second"}]))),
    ("predictor empty name", ("added", SW, mod(A, ["spec", "predictors"], [{"name": ""}]))),
    ("predictors null", ("added", SW, mod(A, ["spec", "predictors"], None))),
    ("spec null", ("added", SW, mod(A, ["spec"], None))),
    ("status null", ("added", SW, mod(A, ["status"], None))),
    ("status string", ("added", SW, mod(A, ["status"], "x"))),
    ("state null", ("added", SW, mod(A, ["status", "state"], None))),
    ("state number", ("added", SW, mod(A, ["status", "state"], 1))),
    ("no ns", ("added", SW, mod(A, ["metadata", "namespace"], DEL))),
    ("empty ns", ("added", SW, mod(A, ["metadata", "namespace"], ""))),
    ("empty name", ("added", SW, mod(A, ["metadata", "name"], ""))),
    ("no name", ("added", SW, mod(A, ["metadata", "name"], DEL))),
    ("no name creating", ("added", SW, mod(sd("Creating"), ["metadata", "name"], DEL))),
    ("no kind", ("added", SW, mod(A, ["kind"], DEL))),
    ("other kind", ("added", SW, mod(A, ["kind"], "Other"))),
    ("bad json", ("added", SW, "{")),
    ("bad old", ("modified", SW, A, "{")),
    ("old wrong", ("modified", SW, A, {"x": 1})),
    ("deleted bad", ("deleted", SW, "{")),
    ("deletionTimestamp number", ("added", SW, mod(A, ["metadata", "deletionTimestamp"], 5))),
    ("bad settings", ("added", SW, A, None, {"domian": "x"})),
    ("bad domain in handle", ("added", SW, A, None, {"domain": ""})),
]
sd_describe = [None, {"domain": ""}, {"domain": ".x"}, {"namespace": "models"}, {"servicePort": "x"}, {"ingressClassName": "nginx"}]

which = sys.argv[1:] or ["contentsite-provisioner", "mongodb-monitor"]
total = 0
for name in which:
    c, d = {"contentsite-provisioner": (cs_cases, cs_describe), "mongodb-monitor": (mm_cases, mm_describe), "seldon-endpoint": (sd_cases, sd_describe)}[name]
    total += run(name, c, d)
print("TOTAL mismatches", total)
sys.exit(1 if total else 0)
