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
{{- /* the prefix also with sharding off: a single leader waits for the shard Leases of its own release only */ -}}
{{- $_ := set $cfg "sharding" (dict "enabled" (.Values.sharding.enabled | default false) "shards" (int .Values.sharding.shards) "lease-prefix" (printf "%s-shard" .Values.leaderElection.leaseName)) -}}
{{- $host := eq (default "0.0.0.0" .Values.listenHost) "::" | ternary "[::]" "0.0.0.0" -}}
{{- $listen := dict "metrics" (printf "%s:%d" $host (int .Values.service.metricsPort)) "health" (printf "%s:%d" $host (int .Values.healthPort)) "external-metrics" (printf "%s:%d" $host (int .Values.externalMetrics.port)) -}}
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

{{/*
A duration (the schema's form: 90s, 1h30m, 1.5s, 250ms) in milliseconds, as a
string: config.c's parse, so the chart refuses what gpuscaler would refuse at
start-up instead of rendering pods that exit.
*/}}
{{- define "gpuscaler.durationMs" -}}
{{- $ms := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ms|s|m|h)" (toString .) -1 -}}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" . | float64 -}}
{{- $u := trimPrefix (regexFind "^[0-9]+(\\.[0-9]+)?" .) . -}}
{{- $f := get (dict "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0) $u -}}
{{- $ms = addf $ms (mulf $n $f) -}}
{{- end -}}
{{- $ms -}}
{{- end -}}

{{/*
Duration ranges of the config keys the chart sets (pkg/controller/config.c) and
the leader election's order: fail with the key, the value and the range.
*/}}
{{- define "gpuscaler.checkDurations" -}}
{{- $hour := 3600000.0 -}}
{{- $checks := list
  (list "config.decision-interval" (index .Values.config "decision-interval") 1000.0 $hour "1s" "1h")
  (list "config.scrape.interval" (dig "interval" "" (default dict .Values.config.scrape)) 100.0 $hour "100ms" "1h")
  (list "config.scrape.timeout" (dig "timeout" "" (default dict .Values.config.scrape)) 100.0 $hour "100ms" "1h")
  (list "config.scrape.rate-window" (dig "rate-window" "" (default dict .Values.config.scrape)) 1000.0 (mulf 24.0 $hour) "1s" "24h")
  (list "config.status.refresh-interval" (dig "refresh-interval" "" (default dict .Values.config.status)) 1000.0 $hour "1s" "1h")
  (list "leaderElection.leaseDuration" .Values.leaderElection.leaseDuration 1000.0 $hour "1s" "1h")
  (list "leaderElection.renewDeadline" .Values.leaderElection.renewDeadline 100.0 $hour "100ms" "1h")
  (list "leaderElection.retryPeriod" .Values.leaderElection.retryPeriod 100.0 $hour "100ms" "1h") -}}
{{- range $checks -}}
{{- $v := index . 1 -}}
{{- if $v -}}
{{- $ms := include "gpuscaler.durationMs" $v | float64 -}}
{{- if or (lt $ms (index . 2)) (gt $ms (index . 3)) -}}
{{- fail (printf "%s: %v is out of range (%s to %s, as gpuscaler's config file allows)" (index . 0) $v (index . 4) (index . 5)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $le := include "gpuscaler.durationMs" .Values.leaderElection.leaseDuration | float64 -}}
{{- $rd := include "gpuscaler.durationMs" .Values.leaderElection.renewDeadline | float64 -}}
{{- $rp := include "gpuscaler.durationMs" .Values.leaderElection.retryPeriod | float64 -}}
{{- /* checked with leader election off too, as gpuscaler checks its config */ -}}
{{- if or (ge $rd $le) (ge $rp $rd) -}}
{{- fail (printf "leaderElection: need retryPeriod < renewDeadline < leaseDuration (have %v, %v, %v)" .Values.leaderElection.retryPeriod .Values.leaderElection.renewDeadline .Values.leaderElection.leaseDuration) -}}
{{- end -}}
{{- /* a pod's rate spans at most 254 scrape intervals (scrape.h, SCRAPE_MAX_WINDOW_INTERVALS) */ -}}
{{- $scrape := default dict .Values.config.scrape -}}
{{- $iv := include "gpuscaler.durationMs" (dig "interval" "5s" $scrape) | float64 -}}
{{- $win := include "gpuscaler.durationMs" (dig "rate-window" "60s" $scrape) | float64 -}}
{{- if gt $win (mulf 254.0 $iv) -}}
{{- fail (printf "config.scrape.rate-window: %v is more than 254 config.scrape.intervals (%v): raise the interval or shorten the window" (dig "rate-window" "60s" $scrape) (dig "interval" "5s" $scrape)) -}}
{{- end -}}
{{- end -}}
