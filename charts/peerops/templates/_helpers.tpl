{{/* Object name prefix: <release>-peerops unless overridden. */}}
{{- define "peerops.fullname" -}}
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

{{- define "peerops.labels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "peerops.selector" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "peerops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "peerops.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "peerops.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "peerops.agentImage" -}}
{{ .Values.image.agentRepository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "peerops.jwtSecretName" -}}
{{- default (printf "%s-jwt" (include "peerops.fullname" .)) .Values.config.existingJwtSecret -}}
{{- end -}}

{{- define "peerops.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "peerops.fullname" .) -}}
{{- end -}}

{{- /*
The store back end: kubernetes (custom resources, several replicas) or git (a repository on a volume, one
writer). docs/kubernetes.md, "The git store in the chart".
*/ -}}
{{- define "peerops.store" -}}
{{- $store := .Values.store | default "kubernetes" -}}
{{- if not (has $store (list "kubernetes" "git")) -}}
{{- fail (printf "store: '%s' is neither kubernetes nor git" $store) -}}
{{- end -}}
{{- $store -}}
{{- end -}}

{{- define "peerops.gitStore" -}}
{{- if eq (include "peerops.store" .) "git" -}}true{{- end -}}
{{- end -}}

{{- /* The admission webhook checks writes of the custom resources: the Kubernetes store's only. */ -}}
{{- define "peerops.webhookEnabled" -}}
{{- if and (not (include "peerops.gitStore" .)) .Values.webhook.enabled -}}true{{- end -}}
{{- end -}}

{{- /*
Controller replicas: controller.replicas, else 2 (Kubernetes store) or 1 (git store). The git store has one
writer: its controller holds a lock in the data dir and a second one on the same volume refuses to start
(docs/store.md, "Crash safety"), so more than one replica is refused here rather than left crash-looping.
*/ -}}
{{- define "peerops.replicas" -}}
{{- $replicas := .Values.controller.replicas -}}
{{- if include "peerops.gitStore" . -}}
{{- if kindIs "invalid" $replicas }}{{ $replicas = 1 }}{{ end -}}
{{- if gt (int $replicas) 1 -}}
{{- fail (printf "controller.replicas=%d: the git store has one writer, so store=git runs one replica (leave controller.replicas empty or set it to 1); several replicas need store=kubernetes" (int $replicas)) -}}
{{- end -}}
{{- else if kindIs "invalid" $replicas }}{{ $replicas = 2 }}{{ end -}}
{{- int $replicas -}}
{{- end -}}

{{- define "peerops.dataClaimName" -}}
{{- default (printf "%s-data" (include "peerops.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}

{{- /*
Values that would be silently ignored, or would put a token where it does not belong, stop the render with
the reason. Included by deployment.yaml (rendered in every case).
*/ -}}
{{- define "peerops.validate" -}}
{{- $git := .Values.git -}}
{{- $_ := include "peerops.replicas" . -}}
{{- if include "peerops.gitStore" . -}}
{{- if $git.remote -}}
{{- if not (regexMatch "^https?://" $git.remote) -}}
{{- fail (printf "git.remote: '%s' is not an http(s):// URL; the git store speaks git over HTTP(S) only" $git.remote) -}}
{{- end -}}
{{- if regexMatch "^https?://[^/]*@" $git.remote -}}
{{- fail "git.remote: credentials go in the Secret named by git.credentialsSecret, not in the URL (it is stored in a ConfigMap and shown in logs)" -}}
{{- end -}}
{{- $interval := int $git.intervalSeconds -}}
{{- if or (lt $interval 1) (gt $interval 3600) -}}
{{- fail (printf "git.intervalSeconds: '%v' is not a number of seconds from 1 to 3600" $git.intervalSeconds) -}}
{{- end -}}
{{- if not (has $git.pushMode (list "sync" "async")) -}}
{{- fail (printf "git.pushMode: '%v' is not sync or async" $git.pushMode) -}}
{{- end -}}
{{- $timeout := int $git.pushTimeoutSeconds -}}
{{- if or (lt $timeout 1) (gt $timeout 60) -}}
{{- fail (printf "git.pushTimeoutSeconds: '%v' is not a number of seconds from 1 to 60" $git.pushTimeoutSeconds) -}}
{{- end -}}
{{- else if or $git.credentialsSecret $git.webhookSecret -}}
{{- fail "git.credentialsSecret and git.webhookSecret are for the forge named by git.remote: set git.remote too" -}}
{{- end -}}
{{- else if or $git.remote $git.credentialsSecret $git.webhookSecret -}}
{{- fail "git.remote, git.credentialsSecret and git.webhookSecret are for the git store: set store=git" -}}
{{- end -}}
{{- end -}}
