# shellcheck shell=bash
# (placeholder: filled in by the registry part of the real node)
registry_ensure() { :; }
registry_stop() { :; }
registry_running() { :; }
registry_status_lines() { :; }
