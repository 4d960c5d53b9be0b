{{/*
Names and labels shared by every template of the gpuscaler chart.
*/}}

{{/* Chart name, or nameOverride. */}}
{{- define "gpuscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of the release's objects: fullnameOverride, else <release>-<name>,
or just <release> when it already contains the name. 63 characters at most.
*/}}
{{- define "gpuscaler.fullname" -}}
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

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "gpuscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "gpuscaler.labels" -}}
helm.sh/chart: {{ include "gpuscaler.chart" . }}
{{ include "gpuscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuscaler
{{- end -}}

{{/* Labels that select the controller pods (never change them on upgrade). */}}
{{- define "gpuscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* ServiceAccount the pods run as. */}}
{{- define "gpuscaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpuscaler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Secret with the external metrics serving certificate. */}}
{{- define "gpuscaler.tlsSecretName" -}}
{{- if .Values.externalMetrics.certManager.enabled -}}
{{- printf "%s-tls" (include "gpuscaler.fullname" .) -}}
{{- else -}}
{{- required "externalMetrics.tls.secretName is required when externalMetrics.certManager.enabled=false" .Values.externalMetrics.tls.secretName -}}
{{- end -}}
{{- end -}}

{{/* Image reference; the tag defaults to the chart's appVersion. */}}
{{- define "gpuscaler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The config file: .Values.config plus what other values decide. */}}
{{- define "gpuscaler.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $le := dict "enabled" .Values.leaderElection.enabled "namespace" .Release.Namespace "lease-name" .Values.leaderElection.leaseName "lease-duration" .Values.leaderElection.leaseDuration "renew-deadline" .Values.leaderElection.renewDeadline "retry-period" .Values.leaderElection.retryPeriod -}}
{{- $_ := set $cfg "leader-election" $le -}}
{{- if .Values.sharding.enabled -}}
{{- $_ := set $cfg "sharding" (dict "enabled" true "shards" (int .Values.sharding.shards) "lease-prefix" (printf "%s-shard" .Values.leaderElection.leaseName)) -}}
{{- end -}}
{{- $listen := dict "metrics" (printf "0.0.0.0:%d" (int .Values.service.metricsPort)) "health" (printf "0.0.0.0:%d" (int .Values.healthPort)) "external-metrics" (printf "0.0.0.0:%d" (int .Values.externalMetrics.port)) -}}
{{- $_ := set $cfg "listen" $listen -}}
{{- $em := dict "enabled" .Values.externalMetrics.enabled -}}
{{- if .Values.externalMetrics.enabled -}}
{{- $_ := set $em "tls-cert-file" "/var/run/gpuscaler/tls/tls.crt" -}}
{{- $_ := set $em "tls-key-file" "/var/run/gpuscaler/tls/tls.key" -}}
{{- end -}}
{{- $up := .Values.externalMetrics.upstream -}}
{{- if $up.url -}}
{{- $_ := set $em "upstream" (dict "url" $up.url "ca-file" $up.caFile "cert-file" $up.certFile "key-file" $up.keyFile "token-file" $up.tokenFile) -}}
{{- end -}}
{{- $_ := set $cfg "external-metrics" $em -}}
{{- $defaults := dict -}}
{{- range $k, $v := .Values.config.defaults -}}
{{- $_ := set $defaults $k (toString $v) -}}
{{- end -}}
{{- $_ := set $cfg "defaults" $defaults -}}
{{- toYaml $cfg -}}
{{- end -}}
