{{/* Names and labels. */}}
{{- define "turnstone.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "turnstone.fullname" -}}
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

{{- define "turnstone.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "turnstone.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "node"). */}}
{{- define "turnstone.selectorLabels" -}}
app.kubernetes.io/name: {{ include "turnstone.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "turnstone.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "turnstone.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "turnstone.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the JWT secret: the user's, else the one the chart generates. */}}
{{- define "turnstone.jwtSecretName" -}}
{{- default (printf "%s-jwt" (include "turnstone.fullname" .)) .Values.auth.jwtSecret.existingSecret -}}
{{- end -}}

{{- define "turnstone.redisUrl" -}}
{{- if .Values.redis.inChart.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "turnstone.fullname" .) -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/* The Secret and key of Redis' password, empty when there is none. */}}
{{- define "turnstone.redisPasswordSecret" -}}
{{- if .Values.redis.inChart.enabled -}}
{{- printf "%s-redis" (include "turnstone.fullname" .) -}}
{{- else -}}
{{- .Values.redis.password.existingSecret -}}
{{- end -}}
{{- end -}}
{{- define "turnstone.redisPasswordKey" -}}
{{- if .Values.redis.inChart.enabled -}}redis-password{{- else -}}{{ .Values.redis.password.key }}{{- end -}}
{{- end -}}

{{/* Where secrets are mounted as files (a projected volume); file names are fixed. */}}
{{- define "turnstone.secretsDir" -}}/run/secrets/turnstone{{- end -}}

{{/* Environment every service shares: logs, drain, the JWT secret file. */}}
{{- define "turnstone.commonEnv" -}}
- name: TURNSTONE_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
- name: TURNSTONE_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
- name: TURNSTONE_DRAIN_TIMEOUT
  value: {{ .Values.drainTimeoutSeconds | quote }}
- name: TURNSTONE_JWT_SECRET_FILE
  value: {{ include "turnstone.secretsDir" . }}/jwt_secret
{{- end -}}

{{/* Redis settings of the bridge and the console. */}}
{{- define "turnstone.redisEnv" -}}
- name: TURNSTONE_REDIS_URL
  value: {{ include "turnstone.redisUrl" . | quote }}
- name: TURNSTONE_REDIS_PREFIX
  value: {{ .Values.redis.prefix | quote }}
{{- if and .Values.redis.username (not .Values.redis.inChart.enabled) }}
- name: TURNSTONE_REDIS_USERNAME
  value: {{ .Values.redis.username | quote }}
{{- end }}
{{- if include "turnstone.redisPasswordSecret" . }}
- name: TURNSTONE_REDIS_PASSWORD_FILE
  value: {{ include "turnstone.secretsDir" . }}/redis_password
{{- end }}
{{- if and .Values.redis.tls.enabled (not .Values.redis.inChart.enabled) }}
- name: TURNSTONE_REDIS_TLS_CA_FILE
  value: {{ include "turnstone.secretsDir" . }}/redis_ca.crt
{{- if .Values.redis.tls.certKey }}
- name: TURNSTONE_REDIS_TLS_CERT_FILE
  value: {{ include "turnstone.secretsDir" . }}/redis_tls.crt
- name: TURNSTONE_REDIS_TLS_KEY_FILE
  value: {{ include "turnstone.secretsDir" . }}/redis_tls.key
{{- end }}
{{- end }}
{{- end -}}

{{/* Projected sources of the Redis secrets (password, TLS files). */}}
{{- define "turnstone.redisSecretSources" -}}
{{- if include "turnstone.redisPasswordSecret" . }}
- secret:
    name: {{ include "turnstone.redisPasswordSecret" . }}
    items:
      - key: {{ include "turnstone.redisPasswordKey" . }}
        path: redis_password
{{- end }}
{{- if and .Values.redis.tls.enabled (not .Values.redis.inChart.enabled) }}
- secret:
    name: {{ .Values.redis.tls.existingSecret }}
    items:
      - key: {{ .Values.redis.tls.caKey }}
        path: redis_ca.crt
      {{- if .Values.redis.tls.certKey }}
      - key: {{ .Values.redis.tls.certKey }}
        path: redis_tls.crt
      - key: {{ .Values.redis.tls.keyKey }}
        path: redis_tls.key
      {{- end }}
{{- end }}
{{- end -}}

{{- define "turnstone.jwtSecretSource" -}}
- secret:
    name: {{ include "turnstone.jwtSecretName" . }}
    items:
      - key: {{ .Values.auth.jwtSecret.key }}
        path: jwt_secret
{{- if .Values.auth.authToken.existingSecret }}
- secret:
    name: {{ .Values.auth.authToken.existingSecret }}
    items:
      - key: {{ .Values.auth.authToken.key }}
        path: auth_token
{{- end }}
{{- end -}}

{{- define "turnstone.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "turnstone.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
{{- end -}}

{{/* preStop: wait for endpoint removal before SIGTERM starts the drain. */}}
{{- define "turnstone.lifecycle" -}}
preStop:
  exec:
    command: ["sleep", {{ .Values.preStopSleepSeconds | quote }}]
{{- end -}}

{{/* Refuse values that cannot work, with the reason. */}}
{{- define "turnstone.validate" -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (add .Values.preStopSleepSeconds .Values.drainTimeoutSeconds | int) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + drainTimeoutSeconds (%v): the kubelet would SIGKILL a node mid-drain" .Values.terminationGracePeriodSeconds (add .Values.preStopSleepSeconds .Values.drainTimeoutSeconds)) -}}
{{- end -}}
{{- if and (eq .Values.node.database.backend "postgresql") (not .Values.node.database.postgresql.existingSecret) -}}
{{- fail "node.database.backend=postgresql needs node.database.postgresql.existingSecret (a Secret holding the PostgreSQL URL)" -}}
{{- end -}}
{{- if and (eq .Values.node.database.backend "sqlite") (not .Values.node.persistence.enabled) -}}
{{- fail "node.database.backend=sqlite needs node.persistence.enabled=true (the SQLite file would be lost with the pod)" -}}
{{- end -}}
{{- if and .Values.redis.tls.enabled (not .Values.redis.inChart.enabled) -}}
{{- if not .Values.redis.tls.existingSecret -}}
{{- fail "redis.tls.enabled needs redis.tls.existingSecret (a Secret holding the CA certificate)" -}}
{{- end -}}
{{- if not (hasPrefix "rediss://" .Values.redis.url) -}}
{{- fail "redis.tls.enabled needs a rediss:// redis.url" -}}
{{- end -}}
{{- if and .Values.redis.tls.certKey (not .Values.redis.tls.keyKey) -}}
{{- fail "redis.tls.certKey needs redis.tls.keyKey (the client key of mutual TLS)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.console.ingress.enabled (not .Values.console.enabled) -}}
{{- fail "console.ingress.enabled needs console.enabled" -}}
{{- end -}}
{{- end -}}

{{/*
The store of a node or the console: `node.database.backend` for both. PostgreSQL: the URL
from the Secret, as a file (one database: the console shares users, tokens and roles with the
nodes). SQLite: the file `path` (the node's on its volume; the console's in an emptyDir).
*/}}
{{- define "turnstone.dbEnv" -}}
- name: TURNSTONE_DB_BACKEND
  value: {{ .ctx.Values.node.database.backend | quote }}
{{- if eq .ctx.Values.node.database.backend "postgresql" }}
- name: TURNSTONE_DB_URL_FILE
  value: {{ .secretsDir }}/db_url
{{- else }}
- name: TURNSTONE_DB_PATH
  value: {{ .path }}
{{- end }}
{{- end }}

{{/* The projected source of the PostgreSQL URL file (nothing for SQLite). */}}
{{- define "turnstone.dbSecretSource" -}}
{{- if eq .Values.node.database.backend "postgresql" }}
- secret:
    name: {{ .Values.node.database.postgresql.existingSecret }}
    items:
      - key: {{ .Values.node.database.postgresql.key }}
        path: db_url
{{- end }}
{{- end }}
