#!/usr/bin/env bash
# Install the real third-party RocketMQ clients used by tests/interop (idempotent).
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/interop/setup_clients.sh" "$@"
