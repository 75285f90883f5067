"""Create N ConfigMaps PREFIX-0 … labelled for testkit, in namespace NS, through P
keep-alive connections: POSTs to the embedded API server's plain-HTTP port (kubectl, one
process creating one object at a time, would be the bottleneck and the figure its own).

    python3 create-configmaps.py N P NS SERVER PREFIX
"""
import http.client
import json
import sys
import threading
import urllib.parse

n, p, ns, server, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
url = urllib.parse.urlsplit(server)
assert url.scheme == "http", f"the embedded server's plain HTTP port, not {server}"
failed = []


def worker(k):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    for i in range(k, n, p):
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": f"{prefix}-{i}", "namespace": ns,
                                        "labels": {"kubewasm.dev/testkit": "testkit"}},
                           "data": {"value": str(i)}})
        conn.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body,
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        if r.status != 201:
            failed.append(f"{prefix}-{i}: {r.status}")


threads = [threading.Thread(target=worker, args=(k,)) for k in range(p)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if failed:
    sys.exit(f"{len(failed)} creations failed, e.g. {failed[:3]}")
