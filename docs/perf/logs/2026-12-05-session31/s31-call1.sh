#!/usr/bin/env bash
# Session 31, call 1 ran session 30's prepared script unchanged (its header says how each binary was built):
# carry [".device/bins-s31.tgz", ".device/next-call.sh"], bash .device/next-call.sh
exec bash "$(dirname "$0")/../2026-12-05-session30/next-call.sh" "$@"
