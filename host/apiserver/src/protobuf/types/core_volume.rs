//! `core/v1` volumes: `Volume` and every volume source and projection, and
//! PersistentVolumeClaims.

msg!(k8s_pb::api::core::v1::AwsElasticBlockStoreVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::AzureDiskVolumeSource {
    disk_name: "diskName" keep,
    disk_uri: "diskURI" keep,
    caching_mode: "cachingMode" keep,
    fs_type: "fsType" keep,
    read_only: "readOnly" keep,
    kind: "kind" keep,
});
msg!(k8s_pb::api::core::v1::AzureFileVolumeSource {
    secret_name: "secretName" keep,
    share_name: "shareName" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::CSIVolumeSource {
    driver: "driver" keep,
    read_only: "readOnly" keep,
    fs_type: "fsType" keep,
    volume_attributes: "volumeAttributes",
    node_publish_secret_ref: "nodePublishSecretRef",
});
msg!(k8s_pb::api::core::v1::CephFsVolumeSource {
    monitors: "monitors",
    path: "path",
    user: "user",
    secret_file: "secretFile",
    secret_ref: "secretRef",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::CinderVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef",
});
msg!(k8s_pb::api::core::v1::ClusterTrustBundleProjection {
    name: "name" keep,
    signer_name: "signerName" keep,
    label_selector: "labelSelector",
    optional: "optional" keep,
    path: "path" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMapProjection {
    local_object_reference: "",
    items: "items",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::ConfigMapVolumeSource {
    local_object_reference: "",
    items: "items",
    default_mode: "defaultMode" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::DownwardAPIProjection { items: "items" });
msg!(k8s_pb::api::core::v1::DownwardAPIVolumeFile {
    path: "path" keep,
    field_ref: "fieldRef",
    resource_field_ref: "resourceFieldRef",
    mode: "mode" keep,
});
msg!(k8s_pb::api::core::v1::DownwardAPIVolumeSource {
    items: "items",
    default_mode: "defaultMode" keep,
});
msg!(k8s_pb::api::core::v1::EmptyDirVolumeSource {
    medium: "medium",
    size_limit: "sizeLimit",
});
msg!(k8s_pb::api::core::v1::EphemeralVolumeSource {
    volume_claim_template: "volumeClaimTemplate",
});
msg!(k8s_pb::api::core::v1::FcVolumeSource {
    target_ww_ns: "targetWWNs",
    lun: "lun" keep,
    fs_type: "fsType",
    read_only: "readOnly",
    wwids: "wwids",
});
msg!(k8s_pb::api::core::v1::FlexVolumeSource {
    driver: "driver" keep,
    fs_type: "fsType",
    secret_ref: "secretRef",
    read_only: "readOnly",
    options: "options",
});
msg!(k8s_pb::api::core::v1::FlockerVolumeSource {
    dataset_name: "datasetName",
    dataset_uuid: "datasetUUID",
});
msg!(k8s_pb::api::core::v1::GcePersistentDiskVolumeSource {
    pd_name: "pdName" keep,
    fs_type: "fsType",
    partition: "partition",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::GitRepoVolumeSource {
    repository: "repository" keep,
    revision: "revision",
    directory: "directory",
});
msg!(k8s_pb::api::core::v1::GlusterfsVolumeSource {
    endpoints: "endpoints" keep,
    path: "path" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::HostPathVolumeSource {
    path: "path" keep,
    r#type: "type" keep,
});
msg!(k8s_pb::api::core::v1::ImageVolumeSource {
    reference: "reference",
    pull_policy: "pullPolicy",
});
msg!(k8s_pb::api::core::v1::IscsiVolumeSource {
    target_portal: "targetPortal" keep,
    iqn: "iqn" keep,
    lun: "lun" keep,
    iscsi_interface: "iscsiInterface",
    fs_type: "fsType",
    read_only: "readOnly",
    portals: "portals",
    chap_auth_discovery: "chapAuthDiscovery",
    chap_auth_session: "chapAuthSession",
    secret_ref: "secretRef",
    initiator_name: "initiatorName" keep,
});
msg!(k8s_pb::api::core::v1::KeyToPath {
    key: "key" keep,
    path: "path" keep,
    mode: "mode" keep,
});
msg!(k8s_pb::api::core::v1::ModifyVolumeStatus {
    target_volume_attributes_class_name: "targetVolumeAttributesClassName",
    status: "status" keep,
});
msg!(k8s_pb::api::core::v1::NfsVolumeSource {
    server: "server" keep,
    path: "path" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaim {
    metadata: "metadata",
    spec: "spec",
    status: "status",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimCondition {
    r#type: "type" keep,
    status: "status" keep,
    last_probe_time: "lastProbeTime",
    last_transition_time: "lastTransitionTime",
    reason: "reason",
    message: "message",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimSpec {
    access_modes: "accessModes",
    selector: "selector",
    resources: "resources",
    volume_name: "volumeName",
    storage_class_name: "storageClassName" keep,
    volume_mode: "volumeMode" keep,
    data_source: "dataSource",
    data_source_ref: "dataSourceRef",
    volume_attributes_class_name: "volumeAttributesClassName" keep,
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimStatus {
    phase: "phase",
    access_modes: "accessModes",
    capacity: "capacity",
    conditions: "conditions",
    allocated_resources: "allocatedResources",
    allocated_resource_statuses: "allocatedResourceStatuses",
    current_volume_attributes_class_name: "currentVolumeAttributesClassName" keep,
    modify_volume_status: "modifyVolumeStatus",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimTemplate {
    metadata: "metadata",
    spec: "spec",
});
msg!(k8s_pb::api::core::v1::PersistentVolumeClaimVolumeSource {
    claim_name: "claimName" keep,
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::PhotonPersistentDiskVolumeSource {
    pd_id: "pdID" keep,
    fs_type: "fsType",
});
msg!(k8s_pb::api::core::v1::PodCertificateProjection {
    signer_name: "signerName",
    key_type: "keyType",
    max_expiration_seconds: "maxExpirationSeconds" keep,
    credential_bundle_path: "credentialBundlePath",
    key_path: "keyPath",
    certificate_chain_path: "certificateChainPath",
    user_annotations: "userAnnotations",
});
msg!(k8s_pb::api::core::v1::PortworxVolumeSource {
    volume_id: "volumeID" keep,
    fs_type: "fsType",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::ProjectedVolumeSource {
    sources: "sources",
    default_mode: "defaultMode" keep,
});
msg!(k8s_pb::api::core::v1::QuobyteVolumeSource {
    registry: "registry" keep,
    volume: "volume" keep,
    read_only: "readOnly",
    user: "user",
    group: "group",
    tenant: "tenant",
});
msg!(k8s_pb::api::core::v1::RbdVolumeSource {
    monitors: "monitors",
    image: "image" keep,
    fs_type: "fsType",
    pool: "pool",
    user: "user",
    keyring: "keyring",
    secret_ref: "secretRef",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::ScaleIoVolumeSource {
    gateway: "gateway" keep,
    system: "system" keep,
    secret_ref: "secretRef",
    ssl_enabled: "sslEnabled",
    protection_domain: "protectionDomain",
    storage_pool: "storagePool",
    storage_mode: "storageMode",
    volume_name: "volumeName",
    fs_type: "fsType",
    read_only: "readOnly",
});
msg!(k8s_pb::api::core::v1::SecretProjection {
    local_object_reference: "",
    items: "items",
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::SecretVolumeSource {
    secret_name: "secretName",
    items: "items",
    default_mode: "defaultMode" keep,
    optional: "optional" keep,
});
msg!(k8s_pb::api::core::v1::ServiceAccountTokenProjection {
    audience: "audience",
    expiration_seconds: "expirationSeconds" keep,
    path: "path" keep,
});
msg!(k8s_pb::api::core::v1::StorageOsVolumeSource {
    volume_name: "volumeName",
    volume_namespace: "volumeNamespace",
    fs_type: "fsType",
    read_only: "readOnly",
    secret_ref: "secretRef",
});
msg!(k8s_pb::api::core::v1::Volume {
    name: "name" keep,
    volume_source: "",
});
msg!(k8s_pb::api::core::v1::VolumeProjection {
    secret: "secret",
    downward_api: "downwardAPI",
    config_map: "configMap",
    service_account_token: "serviceAccountToken",
    cluster_trust_bundle: "clusterTrustBundle",
    pod_certificate: "podCertificate",
});
msg!(k8s_pb::api::core::v1::VolumeResourceRequirements {
    limits: "limits",
    requests: "requests",
});
msg!(k8s_pb::api::core::v1::VolumeSource {
    host_path: "hostPath",
    empty_dir: "emptyDir",
    gce_persistent_disk: "gcePersistentDisk",
    aws_elastic_block_store: "awsElasticBlockStore",
    git_repo: "gitRepo",
    secret: "secret",
    nfs: "nfs",
    iscsi: "iscsi",
    glusterfs: "glusterfs",
    persistent_volume_claim: "persistentVolumeClaim",
    rbd: "rbd",
    flex_volume: "flexVolume",
    cinder: "cinder",
    cephfs: "cephfs",
    flocker: "flocker",
    downward_api: "downwardAPI",
    fc: "fc",
    azure_file: "azureFile",
    config_map: "configMap",
    vsphere_volume: "vsphereVolume",
    quobyte: "quobyte",
    azure_disk: "azureDisk",
    photon_persistent_disk: "photonPersistentDisk",
    projected: "projected",
    portworx_volume: "portworxVolume",
    scale_io: "scaleIO",
    storageos: "storageos",
    csi: "csi",
    ephemeral: "ephemeral",
    image: "image",
});
msg!(k8s_pb::api::core::v1::VsphereVirtualDiskVolumeSource {
    volume_path: "volumePath" keep,
    fs_type: "fsType",
    storage_policy_name: "storagePolicyName",
    storage_policy_id: "storagePolicyID",
});
