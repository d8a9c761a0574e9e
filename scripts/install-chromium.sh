#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests of reports/ (playwright drives it through
# executable_path=/usr/bin/chromium; `playwright install` is never used). Idempotent.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo_cmd=()
else
    sudo_cmd=(sudo)
fi
echo "Installing chromium (Debian package) for the browser tests..."
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium
command -v chromium
