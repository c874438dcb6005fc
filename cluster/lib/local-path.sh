# shellcheck shell=bash
# (placeholder: filled in by the local-path part of the real node)
local_path_ensure() { :; }
local_path_stop() { :; }
local_path_running() { :; }
local_path_status_lines() { :; }
