#!/bin/sh
# Entry point of the ReLeASE images (docker/Dockerfile.cpu, docker/Dockerfile.cuda).
#
#   tracker [ARGS]            TVM RPC tracker on 0.0.0.0:9190 (release rpc tracker)
#   server --key K --tracker HOST:PORT [ARGS]
#                             TVM RPC server for this box's device, on 0.0.0.0 (release rpc server)
#   status [ARGS]             devices per key at a tracker (release rpc status)
#   tune | tune-model | rpc | workloads | bench | regal | knowledge | profile [ARGS]
#                             the tuner: any `release` command
#   sh | bash | python | ...  run that program instead
#
# Inside a container 127.0.0.1 is the container itself, so tracker and server bind 0.0.0.0
# unless ARGS give --host (the last --host wins).
set -e
role="${1:-help}"
[ "$#" -gt 0 ] && shift
case "$role" in
  tracker) exec release rpc tracker --host 0.0.0.0 "$@" ;;
  server)  exec release rpc server --host 0.0.0.0 "$@" ;;
  status)  exec release rpc status "$@" ;;
  help|-h|--help) exec release --help ;;
  # release's commands before any program of that name (Ray installs a `tune` of its own)
  workloads|tune|tune-model|bench|regal|rpc|knowledge|profile) exec release "$role" "$@" ;;
  -*) exec release "$role" "$@" ;;
  *)
    if command -v "$role" >/dev/null 2>&1 && [ "$role" != "release" ]; then
      exec "$role" "$@"
    fi
    [ "$role" = "release" ] && exec release "$@"
    exec release "$role" "$@"
    ;;
esac
