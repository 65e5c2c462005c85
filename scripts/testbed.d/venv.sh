# shellcheck shell=bash
# The Python virtual environment shared by SeaweedFS (weed binary) and the readers,
# and a second one for the Daft reader only (Daft 0.7.26 needs pyarrow < 26, the
# shared venv has 26.0.1).

venv_install() {
  venv_main_install
  venv_daft_install
}

# _venv_pip_install VENV PYTHON REQUIREMENTS: create VENV and install the pinned
# requirements, once: a stamp holds the requirements file's hash.
_venv_pip_install() {
  local venv=$1 python=$2 req=$3 stamp=$1/.requirements.sha256
  local want
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -x "$python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  tb_log "creating Python venv in $venv"
  mkdir -p "$TB_CACHE"
  [ -x "$python" ] || python3 -m venv "$venv"
  "$python" -m pip install --quiet --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
}

venv_main_install() {
  _venv_pip_install "$TB_VENV" "$TB_PYTHON" "$TB_REPO/scripts/requirements.txt"
}

# venv_daft_install: $TB_DAFT_VENV from scripts/requirements-daft.txt. Also called
# by `scripts/readers/read daft` (a test bed that was up before this venv existed);
# the lock keeps two parallel reads from installing at once.
venv_daft_install() {
  local req=$TB_REPO/scripts/requirements-daft.txt
  if [ -x "$TB_DAFT_PYTHON" ] &&
    [ "$(cat "$TB_DAFT_VENV/.requirements.sha256" 2>/dev/null)" = "$(sha256sum "$req" | cut -d' ' -f1)" ]; then
    return 0
  fi
  mkdir -p "$TB_CACHE"
  (
    flock 9
    _venv_pip_install "$TB_DAFT_VENV" "$TB_DAFT_PYTHON" "$req"
  ) 9>"$TB_CACHE/.venv-daft.lock"
}
