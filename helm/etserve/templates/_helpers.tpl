{{/* Chart name, overridable. */}}
{{- define "etserve.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name, 63 characters at most (DNS label). */}}
{{- define "etserve.fullname" -}}
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

{{- define "etserve.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "etserve.labels" -}}
helm.sh/chart: {{ include "etserve.chart" . }}
{{ include "etserve.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: inference-server
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "etserve.selectorLabels" -}}
app.kubernetes.io/name: {{ include "etserve.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "etserve.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "etserve.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "etserve.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* Spring's per-phase shutdown timeout: what is left of the grace period after the preStop delay. */}}
{{- define "etserve.shutdownPhaseSeconds" -}}
{{- $phase := sub (sub (int .Values.shutdown.gracePeriodSeconds) (int .Values.shutdown.preStopSeconds)) (int .Values.shutdown.marginSeconds) }}
{{- if lt (int $phase) 1 }}
{{- fail (printf "shutdown.gracePeriodSeconds (%v) must exceed shutdown.preStopSeconds (%v) + shutdown.marginSeconds (%v)" .Values.shutdown.gracePeriodSeconds .Values.shutdown.preStopSeconds .Values.shutdown.marginSeconds) }}
{{- end }}
{{- $phase }}
{{- end }}

{{/* The application.yml the ConfigMap carries: values' config with the chart-owned keys on top. */}}
{{- define "etserve.applicationConfig" -}}
{{- $owned := dict
  "server" (dict "port" (int .Values.ports.http) "shutdown" "graceful")
  "management" (dict
    "server" (dict "port" (int .Values.ports.management))
    "endpoint" (dict "health" (dict "probes" (dict "enabled" true))))
  "etserve" (dict "grpc" (dict "port" (int .Values.ports.grpc)))
  "spring" (dict "lifecycle" (dict "timeout-per-shutdown-phase" (printf "%ss" (include "etserve.shutdownPhaseSeconds" .)))) }}
{{- /* Private copies of served programs (under /tmp) only where the model volume can change
       under the pod: a PVC others may write. The other sources are filled before the server starts. */}}
{{- $copies := .Values.models.privateCopies | default "auto" }}
{{- $defaults := dict "etserve" (dict "repository" (dict "private-copies"
      (ternary (eq .Values.models.source "pvc") (eq (toString $copies) "true") (eq (toString $copies) "auto")))) }}
{{- /* Streams still leased when the shutdown phase ends (calls stuck past it) are waited for at most
       half the margin, so the whole shutdown stays inside the grace period (the service's own
       default, 30s, would not). A default: values' config may set it. */}}
{{- $_ := set $defaults.etserve "cuda" (dict "drain-timeout" (printf "%ds" (max 1 (div (int .Values.shutdown.marginSeconds) 2)))) }}
{{- /* On a GPU node, a gRPC call of a connection alone on its event loop runs there when its
       model's calls end within 20 ms, as REST's do by the service's own default: less service
       CPU per GPU call with a few clients (bench/results/2026-12-06-h100-inline-alone.md,
       bench/results/2026-12-06-h200-grpc-loops-per-core.md). A default: values' config may set
       it. */}}
{{- if .Values.gpu.enabled }}
{{- $_ := set $defaults.etserve "grpc" (dict "inline-alone-below" "20ms") }}
{{- end }}
{{- /* Tracing (docs/tracing.md): the service's switch, Spring's sampling ratio and OTLP endpoint. */}}
{{- $tracing := dict }}
{{- if .Values.tracing.enabled }}
{{- $tracing = dict
  "etserve" (dict "tracing" (dict "enabled" true))
  "management" (dict
    "tracing" (dict "sampling" (dict "probability" (.Values.tracing.samplingRatio | float64)))
    "opentelemetry" (dict "tracing" (dict "export" (dict "otlp" (dict "endpoint"
      (required "tracing.endpoint: an OTLP/HTTP traces URL is needed when tracing.enabled" .Values.tracing.endpoint)))))) }}
{{- end }}
{{- toYaml (mergeOverwrite $defaults (deepCopy (.Values.config | default dict)) $tracing $owned) }}
{{- end }}

{{/* The preStop action actually used: sleep, exec or none. */}}
{{- define "etserve.preStopAction" -}}
{{- $action := .Values.shutdown.preStopAction | default "auto" }}
{{- if le (int .Values.shutdown.preStopSeconds) 0 }}none
{{- else if eq $action "auto" }}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}sleep{{ else }}exec{{ end }}
{{- else }}{{ $action }}
{{- end }}
{{- end }}

{{/* An emptyDir source from a map with optional medium and sizeLimit; {} when both are empty. */}}
{{- define "etserve.emptyDir" -}}
{{- $source := dict }}
{{- with .medium }}{{ $_ := set $source "medium" . }}{{ end }}
{{- with .sizeLimit }}{{ $_ := set $source "sizeLimit" . }}{{ end }}
{{- toJson $source }}
{{- end }}
