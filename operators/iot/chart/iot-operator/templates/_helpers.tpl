{{- define "iot-operator.labels" -}}
app.kubernetes.io/name: iot-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The ControllerRing of this landscape's IoTServices. */}}
{{- define "iot-operator.ring" -}}
{{- .Values.sharding.ring | default (printf "iot-%s" .Release.Namespace) -}}
{{- end -}}
