{{/* The release's base name, at most 40 characters so that "<base>-<service>" stays a valid name. */}}
{{- define "drydock.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; a service's objects add drydock.selectorLabels. */}}
{{- define "drydock.metaLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: drydock
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "drydock.labels" -}}
{{ include "drydock.metaLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of one service; call with (dict "root" $ "name" $name). */}}
{{- define "drydock.selectorLabels" -}}
app.kubernetes.io/name: drydock
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "drydock.serviceAccountName" -}}
{{- default (include "drydock.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "drydock.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "drydock.sandboxImage" -}}
{{- printf "%s:%s" .Values.sandbox.image.repository (default .Chart.AppVersion .Values.sandbox.image.tag) -}}
{{- end -}}

{{- define "drydock.proxyHost" -}}
{{- printf "%s-credential-proxy.%s.svc.cluster.local" (include "drydock.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* An environment variable from a plain value or from a Secret key; call with (dict "name" "VAR" "value" .url "secret" .urlSecret "what" "nats.url"). */}}
{{- define "drydock.urlEnv" -}}
- name: {{ .name }}
{{- if .secret }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "%sSecret.name is required" .what) .secret.name }}
      key: {{ required (printf "%sSecret.key is required" .what) .secret.key }}
{{- else }}
  value: {{ required (printf "%s (or %sSecret) is required: Drydock needs it" .what .what) .value | quote }}
{{- end }}
{{- end -}}

{{/* The NATS user and its password from nats.usersSecret (the key named as the user); nothing without it. */}}
{{- define "drydock.natsUserEnv" -}}
{{- with .root.Values.nats.usersSecret }}
- name: DRYDOCK_NATS_USER
  value: {{ $.user | quote }}
- name: DRYDOCK_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $.user | quote }}
{{- end }}
{{- end -}}

{{/* The environment of `drydock provision`: the bus settings every service shares, as the provisioner. */}}
{{/* Redis: the URL, the ACL user and its password; call with .Values. */}}
{{- define "drydock.redisEnv" -}}
{{ include "drydock.urlEnv" (dict "name" "DRYDOCK_REDIS_URL" "value" .redis.url "secret" .redis.urlSecret "what" "redis.url") }}
{{- if .redis.username }}
- name: DRYDOCK_REDIS_USERNAME
  value: {{ .redis.username | quote }}
{{- end }}
{{- with .redis.passwordSecret }}
- name: DRYDOCK_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ required "redis.passwordSecret.name is required" .name }}
      key: {{ required "redis.passwordSecret.key is required" .key }}
{{- end }}
{{- end -}}

{{- define "drydock.provisionEnv" -}}
{{- $values := .Values -}}
- name: DRYDOCK_ENVIRONMENT
  value: {{ $values.environment | quote }}
{{ include "drydock.urlEnv" (dict "name" "DRYDOCK_NATS_URL" "value" $values.nats.url "secret" $values.nats.urlSecret "what" "nats.url") }}
- name: DRYDOCK_NATS_REPLICAS
  value: {{ $values.nats.replicas | quote }}
{{- include "drydock.natsUserEnv" (dict "root" . "user" "provisioner") }}
{{ include "drydock.redisEnv" $values }}
- name: DRYDOCK_DASHBOARD_DEV_LOGIN
  value: "false"
{{- range $key, $value := $values.env }}
- name: {{ $key }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* Every environment variable of one service; call with (dict "root" $ "name" $name "svc" $svc). */}}
{{- define "drydock.env" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
- name: DRYDOCK_ENVIRONMENT
  value: {{ $values.environment | quote }}
- name: DRYDOCK_LOG_LEVEL
  value: {{ $values.logLevel | quote }}
{{- with $values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{ include "drydock.urlEnv" (dict "name" "DRYDOCK_NATS_URL" "value" $values.nats.url "secret" $values.nats.urlSecret "what" "nats.url") }}
- name: DRYDOCK_NATS_REPLICAS
  value: {{ $values.nats.replicas | quote }}
{{- include "drydock.natsUserEnv" (dict "root" $root "user" .name) }}
{{- if $values.nats.usersSecret }}
- name: DRYDOCK_NATS_PROVISION
  value: "false"
{{- end }}
{{ include "drydock.redisEnv" $values }}
- name: DRYDOCK_HTTP_HOST
  value: "0.0.0.0"
- name: DRYDOCK_HTTP_PORT
  value: {{ .svc.port | quote }}
{{- if and (ge (len .svc.command) 2) (has (index .svc.command 1) (list "ingress" "dashboard" "web")) }}
{{- /* One HTTP process per core of the CPU limit ("2", 2 or "1500m"), at least one. */}}
{{- $cpu := toString (dig "limits" "cpu" "1" .svc.resources) }}
{{- $cores := 1.0 }}
{{- if hasSuffix "m" $cpu }}
{{- $cores = divf (trimSuffix "m" $cpu | float64) 1000 }}
{{- else }}
{{- $cores = float64 $cpu }}
{{- end }}
- name: DRYDOCK_HTTP_WORKERS
  value: {{ max 1 (ceil $cores | int) | quote }}
{{- end }}
{{- $proxy := index $values.services "credential-proxy" }}
{{- if and $proxy $proxy.enabled }}
- name: DRYDOCK_PROXY_URL
  value: {{ printf "http://%s:%v" (include "drydock.proxyHost" $root) $proxy.port | quote }}
{{- range $proxy.extraPorts }}
{{- if eq .name "egress" }}
- name: DRYDOCK_PROXY_EGRESS_URL
  value: {{ printf "http://%s:%v" (include "drydock.proxyHost" $root) .port | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if .svc.sandboxClient }}
{{- $sandbox := $values.sandbox }}
- name: DRYDOCK_SANDBOX_PROVIDER
  value: {{ $sandbox.provider | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_NAMESPACE
  value: {{ $sandbox.namespace | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_IMAGE
  value: {{ include "drydock.sandboxImage" $root | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_IMAGE_PULL_POLICY
  value: {{ $sandbox.image.pullPolicy | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_IMAGE_PULL_SECRETS
  value: {{ $sandbox.imagePullSecrets | toJson | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_SERVICE_ACCOUNT
  value: {{ printf "%s-sandbox" (include "drydock.fullname" $root) | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_DAEMON_PORT
  value: {{ $sandbox.daemonPort | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_CPU_REQUEST
  value: {{ index $sandbox.resources.requests "cpu" | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_CPU_LIMIT
  value: {{ index $sandbox.resources.limits "cpu" | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_MEMORY_REQUEST
  value: {{ index $sandbox.resources.requests "memory" | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_MEMORY_LIMIT
  value: {{ index $sandbox.resources.limits "memory" | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_EPHEMERAL_STORAGE_REQUEST
  value: {{ index $sandbox.resources.requests "ephemeral-storage" | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_EPHEMERAL_STORAGE_LIMIT
  value: {{ index $sandbox.resources.limits "ephemeral-storage" | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_WORKSPACE_VOLUME
  value: {{ $sandbox.workspace.volume | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_WORKSPACE_SIZE
  value: {{ $sandbox.workspace.size | quote }}
{{- if $sandbox.workspace.storageClass }}
- name: DRYDOCK_SANDBOX_KUBERNETES_WORKSPACE_STORAGE_CLASS
  value: {{ $sandbox.workspace.storageClass | quote }}
{{- end }}
- name: DRYDOCK_SANDBOX_KUBERNETES_ACTIVE_DEADLINE
  value: {{ $sandbox.activeDeadlineSeconds | quote }}
{{- if $sandbox.runtimeClassName }}
- name: DRYDOCK_SANDBOX_KUBERNETES_RUNTIME_CLASS
  value: {{ $sandbox.runtimeClassName | quote }}
{{- end }}
- name: DRYDOCK_SANDBOX_KUBERNETES_NODE_SELECTOR
  value: {{ $sandbox.nodeSelector | toJson | quote }}
- name: DRYDOCK_SANDBOX_KUBERNETES_WARM_POOL_SIZE
  value: {{ $sandbox.warmPool.size | quote }}
{{- end }}
{{- if or (hasKey $values.env "DRYDOCK_DASHBOARD_DEV_LOGIN") (hasKey (default dict .svc.env) "DRYDOCK_DASHBOARD_DEV_LOGIN") }}
{{- fail "DRYDOCK_DASHBOARD_DEV_LOGIN: the chart never turns on the dashboard's development login (anyone could sign in as anyone)" }}
{{- end }}
- name: DRYDOCK_DASHBOARD_DEV_LOGIN
  value: "false"
{{- range $key, $value := $values.env }}
- name: {{ $key }}
  value: {{ $value | quote }}
{{- end }}
{{- range $key, $value := .svc.env }}
- name: {{ $key }}
  value: {{ $value | quote }}
{{- end }}
{{- range $variable, $ref := $values.secrets.env }}
{{- if has $.name $ref.services }}
- name: {{ $variable }}
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.existingSecret is required" $values.secrets.existingSecret }}
      key: {{ $ref.key }}
      optional: {{ default false $ref.optional }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Every enabled web service's host:port in the cluster, as JSON {"name": "host:port"}, for the helm tests. */}}
{{- define "drydock.webAddresses" -}}
{{- $addresses := dict -}}
{{- range $name, $svc := .Values.services -}}
{{- if and $svc.enabled (eq $svc.kind "web") -}}
{{- $_ := set $addresses $name (printf "%s-%s.%s.svc.cluster.local:%v" (include "drydock.fullname" $) $name $.Release.Namespace $svc.port) -}}
{{- end -}}
{{- end -}}
{{- toJson $addresses -}}
{{- end -}}

{{/* The /readyz URL of every enabled web service, space-separated, for the helm test. */}}
{{- define "drydock.testReadyUrls" -}}
{{- $urls := list -}}
{{- range $name, $address := include "drydock.webAddresses" . | fromJson -}}
{{- $urls = append $urls (printf "http://%s/readyz" $address) -}}
{{- end -}}
{{- join " " $urls -}}
{{- end -}}
