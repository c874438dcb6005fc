{{- define "armada-operator.labels" -}}
app.kubernetes.io/name: armada-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "armada-operator.selectorLabels" -}}
app.kubernetes.io/name: armada-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
