# shellcheck shell=bash
# (placeholder: filled in by the cluster-dns part of the real node)
cluster_dns_ensure() { :; }
cluster_dns_stop() { :; }
cluster_dns_running() { :; }
cluster_dns_status_lines() { :; }
