{{/* The chart name (nameOverride). */}}
{{- define "taskfsm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: fullnameOverride, else the release name when it contains the
chart name, else <release>-<chart>. Release "taskfsm" gives the names of deploy/*.yaml.
*/}}
{{- define "taskfsm.fullname" -}}
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

{{/* Labels of every object. */}}
{{- define "taskfsm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "taskfsm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the controller's Pods (immutable in the Deployment's selector). */}}
{{- define "taskfsm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskfsm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "taskfsm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "taskfsm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: repository and tag (default: the chart's appVersion, taskfsm's version). */}}
{{- define "taskfsm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret of the metrics certificate: metrics.certSecret, else cert-manager's, else "". */}}
{{- define "taskfsm.metricsCertSecret" -}}
{{- if .Values.metrics.certSecret }}
{{- .Values.metrics.certSecret }}
{{- else if .Values.metrics.certManager.enabled }}
{{- printf "%s-controller-metrics-tls" (include "taskfsm.fullname" .) }}
{{- end }}
{{- end }}
