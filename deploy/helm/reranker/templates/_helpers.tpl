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

{{- define "reranker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "reranker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reranker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "reranker.labels" -}}
helm.sh/chart: {{ include "reranker.chart" . }}
{{ include "reranker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: triton-server
app.kubernetes.io/managed-by: {{ .Release.Service }}
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

{{/* Does anything come from the bundle image / from the claim? ("true" or "") */}}
{{- define "reranker.usesBundle" -}}
{{- if or (eq .Values.modelRepository.source "initContainer") (eq .Values.pythonBackends.source "initContainer") }}true{{ end }}
{{- end }}
{{- define "reranker.usesPVC" -}}
{{- if or (eq .Values.modelRepository.source "pvc") (eq .Values.pythonBackends.source "pvc") }}true{{ end }}
{{- end }}

{{- define "reranker.claimName" -}}
{{- $pvc := .Values.modelRepository.pvc }}
{{- if $pvc.create }}
{{- default (printf "%s-model-repository" (include "reranker.fullname" .)) $pvc.claimName }}
{{- else }}
{{- required "modelRepository.pvc.claimName is required (or set modelRepository.pvc.create)" $pvc.claimName }}
{{- end }}
{{- end }}

{{- define "reranker.pythonBackendsDir" -}}
{{- printf "%s/python_backends" (trimSuffix "/" .Values.pythonBackends.pythonPath) }}
{{- end }}
