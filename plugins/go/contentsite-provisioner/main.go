// Command contentsite-provisioner is the kubewasm plugin "provision on demand", in Go: for
// every ContentSite (sites.kubewasm.dev/v1alpha1) that is added, modified or resynced (and
// not being deleted), it asks for
//
//  1. a MongoDB (mongodb.com/v1) named <site>-db in the site's namespace, its spec from the
//     site's spec.database with defaults from the settings, and the credentials Secret and
//     project ConfigMap the MongoDB Enterprise operator requires from the settings,
//  2. a Service named <site> selecting app: <site>, port 80 -> 8080,
//  3. the site's status (status subresource, server-side apply): databaseRef, serviceRef,
//     observedGeneration and a Provisioned condition.
//
// Both children are owned by the site (OwnedByTrigger), so deleting the site lets the garbage
// collector remove them: a Deleted event needs no intents. The same plugin as the Rust
// plugins/rust/contentsite-provisioner; plugins/go/build.sh builds it into
// target/plugins/go/contentsite-provisioner.wasm.
package main

import (
	"encoding/json"
	"fmt"

	"kubewasm.dev/kubewasm"
)

const (
	// Name is the plugin's name (and field manager kubewasm-contentsite-provisioner).
	Name = "contentsite-provisioner"
	// WatchID is the id of the ContentSite watch.
	WatchID = "sites"
	// SiteAPIVersion and SiteKind name the ContentSite kind.
	SiteAPIVersion = "sites.kubewasm.dev/v1alpha1"
	SiteKind       = "ContentSite"
)

// Settings is contentsite-provisioner.yaml; every field is optional.
type Settings struct {
	// Namespace: only watch (and write in) this namespace. nil: all namespaces.
	Namespace *string `json:"namespace"`
	// Database holds the defaults for sites that do not say.
	Database DatabaseDefaults `json:"database"`
	// Service holds the Service's ports.
	Service ServiceSettings `json:"service"`
}

// DatabaseDefaults are the defaults of the MongoDB spec. The MongoDB Enterprise operator's
// CRD requires credentials, type and version, and the operator needs the project's ConfigMap
// under opsManager (or cloudManager).
type DatabaseDefaults struct {
	Type    string `json:"type"` // ReplicaSet, Standalone, ShardedCluster
	Members uint32 `json:"members"`
	Version string `json:"version"`
	// Credentials is spec.credentials: the Secret with the Ops Manager / Cloud Manager API key.
	Credentials string `json:"credentials"`
	// ProjectConfigMap is the ConfigMap naming the Ops Manager / Cloud Manager project.
	ProjectConfigMap string `json:"projectConfigMap"`
	// Manager is where the project lives: spec.<Manager>.configMapRef.
	Manager Manager `json:"manager"`
}

// Manager is where a MongoDB's project lives: OpsManager or CloudManager.
type Manager string

const (
	// OpsManager: spec.opsManager.configMapRef.
	OpsManager Manager = "opsManager"
	// CloudManager: spec.cloudManager.configMapRef.
	CloudManager Manager = "cloudManager"
)

// UnmarshalJSON accepts only the two managers, as the Rust twin's enum does.
func (m *Manager) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	switch Manager(s) {
	case OpsManager, CloudManager:
		*m = Manager(s)
		return nil
	}
	return fmt.Errorf("unknown variant %q, expected `opsManager` or `cloudManager`", s)
}

// ServiceSettings are the Service's ports.
type ServiceSettings struct {
	Port       int32 `json:"port"`
	TargetPort int32 `json:"targetPort"`
}

// Default sets the defaults the settings file overrides, field by field.
func (s *Settings) Default() {
	s.Database = DatabaseDefaults{
		Type: "ReplicaSet", Members: 3, Version: "7.0.12",
		Credentials: "mongodb-credentials", ProjectConfigMap: "mongodb-project", Manager: OpsManager,
	}
	s.Service = ServiceSettings{Port: 80, TargetPort: 8080}
}

func (s Settings) namespace() string {
	if s.Namespace == nil {
		return ""
	}
	return *s.Namespace
}

// DatabaseSpec is what a site may say about its database (spec.database).
type DatabaseSpec struct {
	Type    *string `json:"type"`
	Members *uint32 `json:"members"`
	Version *string `json:"version"`
}

// Provisioner is the plugin.
type Provisioner struct{}

func init() { kubewasm.Export(Provisioner{}) }

func main() {}

// Describe watches ContentSites; may create MongoDBs and Services and patch ContentSite status.
func (Provisioner) Describe(s Settings) (kubewasm.Manifest, error) {
	ns := s.namespace()
	return kubewasm.NewManifest(Name, "0.1.0").
		Watch(kubewasm.WatchKind(WatchID, SiteAPIVersion, SiteKind).InNamespace(ns)).
		Grant(kubewasm.GrantOn("mongodb.com", "MongoDB").Create().InNamespace(ns)).
		Grant(kubewasm.GrantOn("", "Service").Create().InNamespace(ns)).
		Grant(kubewasm.GrantOn("sites.kubewasm.dev", SiteKind).PatchStatus().InNamespace(ns)), nil
}

// Handle provisions on added, modified and resync; nothing on deleted or while the site is
// being deleted.
func (Provisioner) Handle(ev kubewasm.Event, s Settings) ([]kubewasm.Intent, error) {
	if ev.IsDeleted() {
		return nil, nil // ownerReferences make the garbage collector remove the children
	}
	site, err := ev.Unstructured()
	if err != nil {
		return nil, err
	}
	if site.IsBeingDeleted() {
		kubewasm.Log.Debugf("%s is being deleted; nothing to do", orUnknown(site, "metadata", "name"))
		return nil, nil
	}
	return Provision(site, s)
}

// orUnknown is the string at the path, or "?" when there is none.
func orUnknown(u kubewasm.Unstructured, fields ...string) string {
	if s, ok, err := kubewasm.NestedString(u, fields...); ok && err == nil {
		return s
	}
	return "?"
}

// Provision is the intents for one live ContentSite: its MongoDB, its Service, its status.
func Provision(site kubewasm.Unstructured, s Settings) ([]kubewasm.Intent, error) {
	if site.GetAPIVersion() != SiteAPIVersion || site.GetKind() != SiteKind {
		return nil, kubewasm.Permanentf("expected a %s %s, got %s %s", SiteAPIVersion, SiteKind,
			orUnknown(site, "apiVersion"), orUnknown(site, "kind"))
	}
	name, err := site.RequireName()
	if err != nil {
		return nil, err
	}
	namespace, ok, err := kubewasm.NestedString(site, "metadata", "namespace")
	if !ok || err != nil {
		return nil, kubewasm.Permanentf("ContentSite has no metadata.namespace")
	}
	var spec DatabaseSpec
	if raw, found, err := kubewasm.NestedFieldNoCopy(site, "spec", "database"); err == nil && found && raw != nil {
		if err := kubewasm.Convert(raw, &spec); err != nil {
			return nil, kubewasm.Permanentf("invalid spec.database: %v", err)
		}
	}
	members := s.Database.Members
	if spec.Members != nil {
		members = *spec.Members
	}
	if members == 0 {
		return nil, kubewasm.Permanentf("spec.database.members must be at least 1")
	}
	dbType, version := s.Database.Type, s.Database.Version
	if spec.Type != nil {
		dbType = *spec.Type
	}
	if spec.Version != nil {
		version = *spec.Version
	}
	dbName := name + "-db"

	database := kubewasm.Unstructured{
		"apiVersion": "mongodb.com/v1",
		"kind":       "MongoDB",
		"metadata": map[string]any{
			"name":      dbName,
			"namespace": namespace,
			"labels": map[string]any{
				"app.kubernetes.io/managed-by": "kubewasm",
				"app.kubernetes.io/part-of":    name,
			},
		},
		"spec": map[string]any{
			"type":        dbType,
			"members":     members,
			"version":     version,
			"credentials": s.Database.Credentials,
			string(s.Database.Manager): map[string]any{
				"configMapRef": map[string]any{"name": s.Database.ProjectConfigMap},
			},
		},
	}

	service := Service{
		APIVersion: "v1",
		Kind:       "Service",
		Metadata: ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels:    map[string]string{"app": name, "app.kubernetes.io/managed-by": "kubewasm"},
		},
		Spec: ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports: []ServicePort{{
				Name: "http", Protocol: "TCP", Port: s.Service.Port, TargetPort: s.Service.TargetPort,
			}},
		},
	}

	condition := kubewasm.NewCondition("Provisioned", true).
		WithReason("ChildrenRequested").
		WithMessage("MongoDB " + dbName + " and Service " + name + " requested").
		ObservedGenerationOf(site).
		TransitionedFrom(site)
	status := map[string]any{
		"databaseRef": dbName,
		"serviceRef":  name,
		"conditions":  []any{condition.Map()},
	}
	if generation, ok, err := kubewasm.NestedInt64(site, "metadata", "generation"); ok && err == nil {
		status["observedGeneration"] = generation
	}
	statusPatch := map[string]any{
		"apiVersion": SiteAPIVersion,
		"kind":       SiteKind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"status":     status,
	}
	ref, err := site.Ref()
	if err != nil {
		return nil, err
	}

	kubewasm.Log.Infof("provisioning %s/%s: MongoDB %s, Service %s", namespace, name, dbName, name)
	return []kubewasm.Intent{
		kubewasm.Create(database).OwnedByTrigger(),
		kubewasm.Create(service).OwnedByTrigger(),
		kubewasm.Patch(ref, statusPatch).Status(),
	}, nil
}

// Service is the part of a core/v1 Service this plugin writes: a typed object, the way a
// client-go controller builds a corev1.Service (omitempty keeps unset fields out of the
// server-side apply, so the plugin owns only what it sets).
type Service struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   ObjectMeta  `json:"metadata"`
	Spec       ServiceSpec `json:"spec"`
}

// ObjectMeta is the part of metav1.ObjectMeta this plugin writes.
type ObjectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// ServiceSpec is the part of corev1.ServiceSpec this plugin writes.
type ServiceSpec struct {
	Selector map[string]string `json:"selector,omitempty"`
	Ports    []ServicePort     `json:"ports,omitempty"`
}

// ServicePort is corev1.ServicePort with a numeric targetPort.
type ServicePort struct {
	Name       string `json:"name,omitempty"`
	Protocol   string `json:"protocol,omitempty"`
	Port       int32  `json:"port"`
	TargetPort int32  `json:"targetPort,omitempty"`
}
