{{/* Chart name, truncated to the 63 characters a label allows. */}}
{{- define "reranker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart unless the release name already has the chart's. */}}
{{- define "reranker.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "reranker.gatewayName" -}}
{{- printf "%s-gateway" (include "reranker.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "reranker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of the Triton server's pods; the component keeps the gateway's pods out. */}}
{{- define "reranker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reranker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: triton-server
{{- end }}

{{- define "reranker.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ include "reranker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "reranker.commonLabels" -}}
helm.sh/chart: {{ include "reranker.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "reranker.labels" -}}
{{ include "reranker.commonLabels" . }}
{{ include "reranker.selectorLabels" . }}
{{- end }}

{{- define "reranker.gatewayLabels" -}}
{{ include "reranker.commonLabels" . }}
{{ include "reranker.gatewaySelectorLabels" . }}
{{- end }}

{{- define "reranker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "reranker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* What --model-repository gets. */}}
{{- define "reranker.modelRepositoryArg" -}}
{{- if eq .Values.modelRepository.source "objectStore" }}
{{- required "modelRepository.objectStore.url is required for source objectStore" .Values.modelRepository.objectStore.url }}
{{- else }}
{{- .Values.modelRepository.mountPath }}
{{- end }}
{{- end }}

{{/* The weights and compile cache claim: the user's, or the one the chart creates. */}}
{{- define "reranker.cacheClaimName" -}}
{{- default (printf "%s-cache" (include "reranker.fullname" .)) .Values.cache.pvc.existingClaim }}
{{- end }}

{{/* "true" when the chart creates the cache claim. */}}
{{- define "reranker.createsCacheClaim" -}}
{{- if and (eq .Values.cache.source "pvc") (not .Values.cache.pvc.existingClaim) }}true{{ end }}
{{- end }}

{{/* The Secret holding the admin key of Triton's restricted control APIs: the user's, or the one the chart makes. */}}
{{- define "reranker.adminKeySecretName" -}}
{{- default (printf "%s-admin-key" (include "reranker.fullname" .)) .Values.server.adminKeySecret.name -}}
{{- end }}
