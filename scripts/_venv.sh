# Shared set-up for scripts/demo and scripts/test (sourced, not run).

ensure_venv() {  # ensure_venv ".[extras]": a .venv with ldptel installed editable
  local python=${PYTHON:-python3}
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  local stamp=.venv/.installed-$(echo "$1" | tr -c 'a-z' _)
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q -U pip "setuptools>=68" wheel
    .venv/bin/python -m pip install -q -e "$1"
    touch "$stamp"
  fi
}

ensure_chromium() {  # Debian's Chromium for the headless-browser test of the HTML report
  command -v chromium >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium not found: install it (apt-get install chromium) for the HTML report test" >&2
  fi
}
