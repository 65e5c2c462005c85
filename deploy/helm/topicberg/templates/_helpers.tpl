{{- define "topicberg.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 53 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "topicberg.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "topicberg.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "topicberg.jobConfigMap" -}}
{{- default (printf "%s-job" (include "topicberg.fullname" .)) .Values.job.existingConfigMap -}}
{{- end -}}

{{- define "topicberg.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end -}}

{{- define "topicberg.metricsEnv" -}}
{{- if .Values.metrics.tokenSecret.name -}}
- name: TOPICBERG_METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.metrics.tokenSecret.name }}
      key: {{ .Values.metrics.tokenSecret.key }}
{{- end }}
{{- end -}}

{{- define "topicberg.scrapeAnnotations" -}}
{{- if .root.Values.metrics.annotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
