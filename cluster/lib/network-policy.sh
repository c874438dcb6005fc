# shellcheck shell=bash
# (placeholder: filled in by the network-policy part of the real node)
network_policy_ensure() { :; }
network_policy_stop() { :; }
network_policy_running() { :; }
network_policy_status_lines() { :; }
