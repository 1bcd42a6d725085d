# Sourced by the test runners: one way to keep a Python venv in step with a
# requirements file.
#
#   ensure_venv VENV REQUIREMENTS
#
# Creates VENV if it is missing or broken, and installs REQUIREMENTS into it only when
# that file changed since the last install (a sha256 stamp inside the venv), so that
# repeated runs cost nothing. Returns non-zero if python3 -m venv or pip fails.

ensure_venv() {
  local venv="$1" req="$2" stamp="$1/.requirements.sha256" sum
  sum="$(sha256sum "$req" | cut -d' ' -f1)"
  if [[ -x "$venv/bin/python" ]] && ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    echo "venv at $venv is broken; recreating"
    rm -rf "$venv"
  fi
  if [[ ! -x "$venv/bin/python" ]]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" || return 1
    rm -f "$stamp"
  fi
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    echo "requirements unchanged; venv up to date ($venv)"
  else
    echo "installing $req into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip || return 1
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" || return 1
    printf '%s\n' "$sum" >"$stamp"
  fi
}
