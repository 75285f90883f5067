// Command mongodb-monitor is the kubewasm plugin "watch what you don't own", in Go: for every
// MongoDB (mongodb.com/v1) in any namespace, whoever created it, it asks for a Prometheus
// Operator ServiceMonitor (monitoring.coreos.com/v1) named <db>-monitor in the same
// namespace, selecting the database's Services (app: <db>) and scraping their metrics port.
//
// The ServiceMonitor is owned by the MongoDB (OwnedByTrigger), so it disappears with it: a
// Deleted event needs no intents. It uses nothing of a MongoDB but its identity and
// metadata.deletionTimestamp, and declares so (Fields): the host delivers and caches only
// those. The same plugin as the Rust plugins/rust/mongodb-monitor;
// plugins/go/build.sh builds it into target/plugins/go/mongodb-monitor.wasm.
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"kubewasm.dev/kubewasm"
)

// Name is the plugin's name in its manifest.
const Name = "mongodb-monitor"

// WatchID is the id of the MongoDB watch.
const WatchID = "mongodbs"

// Fields are the fields of a MongoDB the plugin uses beyond its identity (apiVersion, kind,
// name, namespace, uid), which the host always keeps: its projection.
var Fields = []string{"metadata.deletionTimestamp"}

// Settings is mongodb-monitor.yaml; every field is optional.
type Settings struct {
	// Namespace: only watch (and write in) this namespace. "": all namespaces.
	Namespace *string `json:"namespace"`
	// Interval is the scrape interval, a Prometheus duration such as 30s or 1m30s.
	Interval string `json:"interval"`
	// Port is the name of the Service port that serves metrics.
	Port string `json:"port"`
	// Labels are extra labels on the ServiceMonitor, e.g. release: prometheus so the
	// Prometheus Operator's serviceMonitorSelector picks it up.
	Labels map[string]string `json:"labels"`
}

// Default sets the defaults the settings file overrides.
func (s *Settings) Default() {
	s.Interval = "30s"
	s.Port = "metrics"
}

// Validate checks the interval's syntax and the port name.
func (s Settings) Validate() error {
	if !IsPrometheusDuration(s.Interval) {
		return fmt.Errorf("interval %q is not a Prometheus duration (e.g. 30s, 1m30s)", s.Interval)
	}
	if s.Port == "" {
		return fmt.Errorf("port must not be empty")
	}
	return nil
}

// IsPrometheusDuration reports whether s is a Prometheus duration: one or more
// <digits><unit> with units y, w, d, h, m, s, ms in that order ("0" alone too).
func IsPrometheusDuration(s string) bool {
	if s == "0" {
		return true
	}
	if s == "" {
		return false
	}
	rank := map[string]int{"y": 0, "w": 1, "d": 2, "h": 3, "m": 4, "s": 5, "ms": 6}
	last := -1
	for s != "" {
		digits := 0
		for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
			digits++
		}
		if digits == 0 {
			return false
		}
		s = s[digits:]
		unit := ""
		for _, u := range []string{"y", "w", "d", "h", "ms", "m", "s"} {
			if strings.HasPrefix(s, u) {
				unit = u
				break
			}
		}
		if unit == "" || rank[unit] <= last {
			return false
		}
		last = rank[unit]
		s = s[len(unit):]
	}
	return true
}

// Monitor is the plugin.
type Monitor struct{}

func init() { kubewasm.Export(Monitor{}) }

func main() {}

// Describe watches MongoDBs and may create ServiceMonitors.
func (Monitor) Describe(s Settings) (kubewasm.Manifest, error) {
	if err := s.Validate(); err != nil {
		return kubewasm.Manifest{}, err
	}
	ns := ""
	if s.Namespace != nil {
		ns = *s.Namespace
	}
	return kubewasm.NewManifest(Name, "0.1.0").
		Watch(kubewasm.WatchKind(WatchID, "mongodb.com/v1", "MongoDB").InNamespace(ns).WithFields(Fields...)).
		Grant(kubewasm.GrantOn("monitoring.coreos.com", "ServiceMonitor").Create().InNamespace(ns)), nil
}

// Handle asks for a ServiceMonitor for every live MongoDB; nothing on deletion.
func (Monitor) Handle(ev kubewasm.Event, s Settings) ([]kubewasm.Intent, error) {
	if ev.IsDeleted() {
		return nil, nil
	}
	db, err := ev.Unstructured()
	if err != nil {
		return nil, err
	}
	if db.IsBeingDeleted() {
		return nil, nil
	}
	monitor, err := ServiceMonitorFor(db, s)
	if err != nil {
		return nil, err
	}
	monitorName, _ := json.Marshal(monitor.GetName())
	kubewasm.Log.Infof("monitoring MongoDB %s/%s with ServiceMonitor %s", db.GetNamespace(), db.GetName(), monitorName)
	return []kubewasm.Intent{kubewasm.Create(monitor).OwnedByTrigger()}, nil
}

// orUnknown is the string at the path, or "?" when there is none.
func orUnknown(u kubewasm.Unstructured, fields ...string) string {
	if s, ok, err := kubewasm.NestedString(u, fields...); ok && err == nil {
		return s
	}
	return "?"
}

// ServiceMonitorFor is the ServiceMonitor for one MongoDB.
func ServiceMonitorFor(db kubewasm.Unstructured, s Settings) (kubewasm.Unstructured, error) {
	if db.GetAPIVersion() != "mongodb.com/v1" || db.GetKind() != "MongoDB" {
		return nil, kubewasm.Permanentf("expected a mongodb.com/v1 MongoDB, got %s %s",
			orUnknown(db, "apiVersion"), orUnknown(db, "kind"))
	}
	name, err := db.RequireName()
	if err != nil {
		return nil, err
	}
	namespace, ok, err := kubewasm.NestedString(db, "metadata", "namespace")
	if !ok || err != nil {
		return nil, kubewasm.Permanentf("MongoDB has no metadata.namespace")
	}
	labels := map[string]any{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels["app.kubernetes.io/managed-by"] = "kubewasm"
	labels["app"] = name
	return kubewasm.Unstructured{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "ServiceMonitor",
		"metadata": map[string]any{
			"name":      name + "-monitor",
			"namespace": namespace,
			"labels":    labels,
		},
		"spec": map[string]any{
			"selector":  map[string]any{"matchLabels": map[string]any{"app": name}},
			"endpoints": []any{map[string]any{"port": s.Port, "interval": s.Interval}},
		},
	}, nil
}
