# shellcheck shell=bash
# The Python virtual environment shared by SeaweedFS (weed binary) and the readers.

venv_install() {
  local req=$TB_REPO/scripts/requirements.txt stamp=$TB_VENV/.requirements.sha256
  local want
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -x "$TB_PYTHON" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  tb_log "creating Python venv in $TB_VENV"
  mkdir -p "$TB_CACHE"
  [ -x "$TB_PYTHON" ] || python3 -m venv "$TB_VENV"
  "$TB_PYTHON" -m pip install --quiet --disable-pip-version-check -r "$req"
  echo "$want" >"$stamp"
}
