{{/* Chart name. */}}
{{- define "kubewasm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name, or release-chart when the release name lacks it. */}}
{{- define "kubewasm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "kubewasm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kubewasm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubewasm
kubewasm.dev/install: {{ .Release.Namespace }}
{{- end -}}

{{/* Selector of the host's pods. */}}
{{- define "kubewasm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubewasm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: host
{{- end -}}

{{- define "kubewasm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kubewasm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kubewasm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}

{{/* Whether plugins come from an image (init container) instead of ConfigMaps. */}}
{{- define "kubewasm.pluginImage" -}}
{{- if .Values.plugins.image.repository -}}
{{- printf "%s:%s" .Values.plugins.image.repository (default "latest" .Values.plugins.image.tag | toString) -}}
{{- end -}}
{{- end -}}

{{/* Whether /metrics and /status are bound to the pod's address (non-empty) or loopback. */}}
{{- define "kubewasm.metricsExposed" -}}
{{- if or .Values.metrics.expose .Values.metrics.serviceMonitor.enabled -}}true{{- end -}}
{{- end -}}
