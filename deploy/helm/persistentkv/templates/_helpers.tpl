{{/* Names, labels and the pieces the router and worker templates share. */}}

{{- define "pkv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-wide prefix of every resource name; component suffixes keep it within 63 characters. */}}
{{- define "pkv.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pkv.router.fullname" -}}{{ include "pkv.fullname" . }}-router{{- end -}}
{{- define "pkv.worker.fullname" -}}{{ include "pkv.fullname" . }}-worker{{- end -}}
{{/* The headless Service the router resolves (A records of ready worker pods). */}}
{{- define "pkv.worker.headless" -}}{{ include "pkv.fullname" . }}-workers{{- end -}}

{{- define "pkv.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pkv.labels" -}}
helm.sh/chart: {{ include "pkv.chart" . }}
app.kubernetes.io/name: {{ include "pkv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component; call with (dict "ctx" $ "component" "router"). */}}
{{- define "pkv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pkv.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pkv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pkv.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "pkv.image" -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/*
Grace period: drain + preStop + 5 s unless set; a smaller explicit value fails the render, since
the kubelet would SIGKILL streams the process was still allowed to finish.
Call with a component's values (router or worker).
*/}}
{{- define "pkv.gracePeriod" -}}
{{- $min := add .drainTimeoutSeconds .preStopSleepSeconds 5 -}}
{{- if eq (int .terminationGracePeriodSeconds) 0 -}}
{{- $min -}}
{{- else if lt (int .terminationGracePeriodSeconds) (int $min) -}}
{{- fail (printf "terminationGracePeriodSeconds %v is below drainTimeoutSeconds + preStopSleepSeconds + 5 = %v" .terminationGracePeriodSeconds $min) -}}
{{- else -}}
{{- .terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/*
One health probe. gRPC (native, grpc.health.v1) unless the port speaks TLS, which kubelet's gRPC
probe cannot; then `pkv health` runs in the container. Args: dict with port, service, tls (bool),
tlsArgs (list), timing (periodSeconds, timeoutSeconds, failureThreshold).
*/}}
{{- define "pkv.grpcProbe" -}}
{{- if .tls -}}
exec:
  command:
    - pkv
    - health
    - --addr=127.0.0.1:{{ .port }}
    - --service={{ .service }}
    {{- range .tlsArgs }}
    - {{ . | quote }}
    {{- end }}
{{- else -}}
grpc:
  port: {{ .port }}
  service: {{ .service | quote }}
{{- end }}
periodSeconds: {{ .timing.periodSeconds }}
timeoutSeconds: {{ .timing.timeoutSeconds }}
failureThreshold: {{ .timing.failureThreshold }}
{{- end -}}

{{/* preStop sleep then SIGTERM (the binaries drain on it). */}}
{{- define "pkv.lifecycle" -}}
preStop:
  exec:
    command: ["sleep", "{{ . }}"]
{{- end -}}

{{- define "pkv.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "pkv.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}
{{- define "pkv.workerTlsSecretName" -}}
{{- default (printf "%s-worker-tls" (include "pkv.fullname" .)) .Values.workerTls.existingSecret -}}
{{- end -}}
{{- define "pkv.apiKeysSecretName" -}}
{{- default (printf "%s-api-keys" (include "pkv.fullname" .)) .Values.apiKeys.existingSecret -}}
{{- end -}}
{{- define "pkv.policyConfigMapName" -}}
{{- default (printf "%s-policy" (include "pkv.fullname" .)) .Values.worker.policy.existingConfigMap -}}
{{- end -}}
{{- define "pkv.policyEnabled" -}}
{{- if or .Values.worker.policy.existingConfigMap .Values.worker.policy.json -}}true{{- end -}}
{{- end -}}

{{/* Checks of combinations the schema of values.yaml cannot express. */}}
{{- define "pkv.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) (or (not .Values.tls.cert) (not .Values.tls.key)) -}}
{{- fail "tls.enabled needs tls.existingSecret or both tls.cert and tls.key" -}}
{{- end -}}
{{- if and .Values.workerTls.enabled (not .Values.workerTls.existingSecret) (or (not .Values.workerTls.cert) (not .Values.workerTls.key) (not .Values.workerTls.ca)) -}}
{{- fail "workerTls.enabled needs workerTls.existingSecret or workerTls.cert, .key and .ca" -}}
{{- end -}}
{{- if and .Values.apiKeys.enabled (not .Values.apiKeys.existingSecret) (not .Values.apiKeys.keys) -}}
{{- fail "apiKeys.enabled needs apiKeys.existingSecret or a non-empty apiKeys.keys" -}}
{{- end -}}
{{- if not (has .Values.keda.metric (list "vllm" "pkv")) -}}
{{- fail (printf "keda.metric must be vllm or pkv, got %q" .Values.keda.metric) -}}
{{- end -}}
{{- if not (has .Values.worker.backend (list "auto" "cpu" "cuda")) -}}
{{- fail (printf "worker.backend must be auto, cpu or cuda, got %q" .Values.worker.backend) -}}
{{- end -}}
{{- end -}}
