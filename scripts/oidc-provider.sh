#!/usr/bin/env bash
# A throwaway OpenID Connect provider for the console's sign-in tests: panva's
# oidc-provider from npm (scripts/oidc-idp.mjs says what it is set up with), loopback
# only, plain HTTP, under a directory of its own, stopped and deleted afterwards.
#
#   scripts/oidc-provider.sh start DIR PORT REDIRECT_URI [ROLES]   # prints the issuer
#   scripts/oidc-provider.sh stop DIR                              # idempotent
#
# The package is pinned below and installed with `npm install --prefix` into
# .cache/oidc-provider at the repository root (npm's cache there too), only when the
# installed version differs from the pin; the server script is copied next to it so that
# Node finds the package. The log is DIR/idp.log, the pid DIR/idp.pid. Needs node (20+),
# npm and python3.
set -euo pipefail

OIDC_PROVIDER_VERSION=9.13.3

cmd="${1:?usage: oidc-provider.sh start DIR PORT REDIRECT_URI [ROLES] | stop DIR}"
dir="${2:?directory required}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$root/.cache/oidc-provider"

# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"

# Our server is the process in DIR/idp.pid whose arguments include DIR.
stop_server() {
  service_stop "$dir/idp.pid" "$dir"
}

# Ready once the discovery document answers.
ready_check() {
  [[ "$(service_http_status "http://127.0.0.1:$port/.well-known/openid-configuration")" == 200 ]] && return 0
  return 1
}

case "$cmd" in
  start)
    port="${3:?port required}"
    redirect_uri="${4:?redirect URI required}"
    roles="${5:-}"
    service_port_arg "$port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    stop_server
    rm -f "$dir/idp.pid" "$dir/idp.log"
    service_npm_install "$prefix" oidc-provider "$OIDC_PROVIDER_VERSION" || { echo "could not install oidc-provider@$OIDC_PROVIDER_VERSION" >&2; exit 1; }
    # Next to its node_modules, so that `import "oidc-provider"` resolves. DIR, the last
    # argument, tells this server's process apart (service_stop's MATCH).
    cp "$root/scripts/oidc-idp.mjs" "$prefix/idp.mjs"
    service_launch "$dir/idp.pid" "$dir/idp.log" \
      node "$prefix/idp.mjs" "$port" "$redirect_uri" "$roles" "$dir"
    if service_wait 30 "$dir/idp.pid" "$dir" ready_check; then
      echo "http://127.0.0.1:$port"
      exit 0
    fi
    stop_server
    service_fail "$dir/idp.log" "oidc-provider did not come up on 127.0.0.1:$port"
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    dir="$(cd "$dir" && pwd)"
    stop_server
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
