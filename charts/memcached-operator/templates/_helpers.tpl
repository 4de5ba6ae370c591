{{/* app.kubernetes.io/name: the chart's name, or nameOverride. */}}
{{- define "memcached-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' names: fullnameOverride, else the release name when it already
holds the chart's name (a release called memcached-operator gets deploy/'s
names), else RELEASE-NAME.
*/}}
{{- define "memcached-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "memcached-operator.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
What the pods are selected by: deploy/'s one label, so a Deployment applied
from deploy/ and one from this chart select the same pods (a selector cannot
change later).
*/}}
{{- define "memcached-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memcached-operator.name" . }}
{{- end }}

{{/* Every object's labels: the selector's and Helm's standard ones. */}}
{{- define "memcached-operator.labels" -}}
{{ include "memcached-operator.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memcached-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "memcached-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: the existing ServiceAccount to run as (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "memcached-operator.leaderElectionId" -}}
{{- default (include "memcached-operator.fullname" .) .Values.leaderElection.id }}
{{- end }}

{{/* The ServiceAccount as an RBAC subject. */}}
{{- define "memcached-operator.subjects" -}}
- kind: ServiceAccount
  name: {{ include "memcached-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* The metrics port's name: https as the Go operator's, http when plain. */}}
{{- define "memcached-operator.metricsPortName" -}}
{{- ternary "https" "http" .Values.metrics.secure }}
{{- end }}

{{/*
The Memcached module's rules: exactly what the operator checks its identity
for (`memcached-operator rbac` prints them; deploy/rbac/module_role.yaml).
*/}}
{{- define "memcached-operator.memcachedModuleRules" -}}
- apiGroups: [memcached.c5c3.io]
  resources: [memcacheds]
  verbs: [list, watch]
- apiGroups: [memcached.c5c3.io]
  resources: [memcacheds/status]
  verbs: [patch]
# Admission (OwnerReferencesPermissionEnforcement) checks it when a child
# carries blockOwnerDeletion: true; never requested.
- apiGroups: [memcached.c5c3.io]
  resources: [memcacheds/finalizers]
  verbs: [update]
# delete: optional children whose feature is turned off, and admission
# wants it to adopt an orphan Deployment or Service.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, update, delete]
# The SASL and TLS Secrets a CR references, read from a cache.
- apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
{{- end }}
