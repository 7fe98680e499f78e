{{- /*
Which kustomize combination the values pick: mode/certificates/serviceMonitor. The
generated templates (templates/generated, from hack/helm/generate.py) emit each object in
exactly the combinations kustomize renders it in.
*/}}
{{- define "tierra.cell" -}}
{{- printf "%s/%s/%t" .Values.mode .Values.webhook.certificates .Values.metrics.serviceMonitor.enabled -}}
{{- end }}

{{- define "tierra.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end }}
