{{- define "tritium.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tritium.fullname" -}}
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

{{- define "tritium.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tritium.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tritium.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tritium.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tritium.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tritium.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Seconds from the start of termination until the server has surely exited. */}}
{{- define "tritium.gracePeriod" -}}
{{- $drain := int (default 0 .Values.server.drainDelaySeconds) }}
{{- $need := add .Values.preStopSleepSeconds $drain .Values.server.exitTimeoutSeconds .Values.terminationGraceMarginSeconds }}
{{- if .Values.terminationGracePeriodSeconds }}
{{- if lt (int .Values.terminationGracePeriodSeconds) (int $need) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) is below preStop sleep + drain delay + exit timeout + margin (%d)" (int .Values.terminationGracePeriodSeconds) (int $need)) }}
{{- end }}
{{- .Values.terminationGracePeriodSeconds }}
{{- else }}
{{- $need }}
{{- end }}
{{- end }}

{{/* The pods of this release, as a PromQL label matcher. */}}
{{- define "tritium.podMatcher" -}}
namespace="{{ .Release.Namespace }}",pod=~"{{ include "tritium.fullname" . }}-[a-z0-9]+-[a-z0-9]+"
{{- end }}
