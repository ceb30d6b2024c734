#!/usr/bin/env bash
# Install (or uninstall) autod as a systemd service from this checkout. Idempotent: a second
# run changes nothing, and an edited /etc/autod/autod.yaml is never overwritten.
# See docs/OPERATIONS.md.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: deploy/install.sh [options]
  --prefix DIR       where the venv goes (default /opt/autod)
  --destdir DIR      stage the files under DIR; no user, no chown, no systemctl
  --workspace DIR    the repository autod edits: ReadWritePaths= in the unit and
                     workspace: in a newly installed autod.yaml (default: the one
                     in the installed unit, else /srv/repo)
  --python PYTHON    interpreter for the venv (default python3)
  --no-venv          do not create the venv or pip install (files only)
  --uninstall        remove the units, venv, logrotate file and the autod user;
                     keeps /etc/autod, /var/lib/autod, /var/log/autod
    --purge          ... and remove those too
    --keep-user      ... but keep the autod user
  -h, --help         this text
EOF
}

die() { printf 'install.sh: %s\n' "$*" >&2; exit 2; }
say() { printf '%s\n' "$*"; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=/opt/autod
DESTDIR=""
WORKSPACE=""
PYTHON=python3
NO_VENV=0
UNINSTALL=0
PURGE=0
KEEP_USER=0
SERVICE_USER=autod

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a value"; PREFIX=$2; shift ;;
        --destdir) [ $# -ge 2 ] || die "--destdir needs a value"; DESTDIR=$2; shift ;;
        --workspace) [ $# -ge 2 ] || die "--workspace needs a value"; WORKSPACE=$2; shift ;;
        --python) [ $# -ge 2 ] || die "--python needs a value"; PYTHON=$2; shift ;;
        --no-venv) NO_VENV=1 ;;
        --uninstall) UNINSTALL=1 ;;
        --purge) PURGE=1 ;;
        --keep-user) KEEP_USER=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
    shift
done

DESTDIR=${DESTDIR%/}
ETC=$DESTDIR/etc/autod
UNIT_DIR=$DESTDIR/etc/systemd/system
# A rerun without --workspace keeps the workspace of the installed unit.
if [ -z "$WORKSPACE" ] && [ -f "$UNIT_DIR/autod.service" ]; then
    WORKSPACE=$(sed -n 's/^ReadWritePaths=//p' "$UNIT_DIR/autod.service" | head -n 1)
fi
WORKSPACE=${WORKSPACE:-/srv/repo}

# Paths end up in unit files and sed replacements: keep them to characters that need no
# quoting there (a repository elsewhere can still be set with a drop-in, see OPERATIONS.md).
safe_path='^/[A-Za-z0-9._/@+-]*$'
[[ $PREFIX =~ $safe_path ]] || die "--prefix must be an absolute path of [A-Za-z0-9._/@+-]: $PREFIX"
[[ $WORKSPACE =~ $safe_path ]] || die "--workspace must be an absolute path of [A-Za-z0-9._/@+-]: $WORKSPACE"
[ "$PURGE" = 0 ] || [ "$UNINSTALL" = 1 ] || die "--purge only goes with --uninstall"
[ "$KEEP_USER" = 0 ] || [ "$UNINSTALL" = 1 ] || die "--keep-user only goes with --uninstall"
PREFIX=${PREFIX%/}

# LIVE: installing onto this very system (root, no --destdir): users, owners, systemctl.
LIVE=0
if [ -z "$DESTDIR" ]; then
    [ "$(id -u)" = 0 ] || die "run as root, or stage the files with --destdir DIR"
    LIVE=1
fi
if [ "$LIVE" = 1 ] && [ -d /run/systemd/system ]; then SYSTEMD_UP=1; else SYSTEMD_UP=0; fi

LOGROTATE=$DESTDIR/etc/logrotate.d/autod
ROOT_PREFIX=$DESTDIR$PREFIX
VENV=$ROOT_PREFIX/venv
LINK=$DESTDIR/usr/local/bin/autod
# The pristine example as last installed: tells an untouched autod.yaml from an edited one.
PRISTINE=$ROOT_PREFIX/share/autod.yaml.installed

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Run a command that changes the system itself, or only say it when staging.
system() {
    if [ "$LIVE" = 1 ]; then
        "$@"
    else
        printf 'would run:'
        printf ' %q' "$@"
        printf '\n'
    fi
}

# install_file SOURCE DEST MODE: copy only when the content differs, so reruns touch nothing.
install_file() {
    local src=$1 dest=$2 mode=$3
    mkdir -p "$(dirname "$dest")"
    if [ -f "$dest" ] && cmp -s "$src" "$dest"; then
        chmod "$mode" "$dest"
        say "unchanged: $dest"
    else
        install -m "$mode" "$src" "$dest"
        say "installed: $dest"
    fi
}

ensure_dir() {
    local dir=$1 mode=$2
    [ -d "$dir" ] || say "created: $dir"
    mkdir -p "$dir"
    chmod "$mode" "$dir"
}

render_unit() {
    local src=$1 out=$2
    sed -e "s|/opt/autod/|$PREFIX/|g" -e "s|^ReadWritePaths=/srv/repo\$|ReadWritePaths=$WORKSPACE|" \
        "$src" >"$out"
    if [ "$(basename "$src")" = autod.service ]; then
        grep -qx "ReadWritePaths=$WORKSPACE" "$out" || die "$src has no 'ReadWritePaths=/srv/repo' line"
    fi
}

render_config() {
    local out=$1
    # A new config points at the workspace and the state dir the unit provides; the trailing
    # comments on those lines are kept.
    sed -e "s|^workspace:[[:space:]]*[^#[:space:]]*|workspace: $WORKSPACE|" \
        -e "s|^state_dir:[[:space:]]*[^#[:space:]]*|state_dir: /var/lib/autod|" \
        "$SRC/config/autod.yaml" >"$out"
    grep -q '^workspace:' "$out" || printf 'workspace: %s\n' "$WORKSPACE" >>"$out"
    grep -q '^state_dir:' "$out" || printf 'state_dir: /var/lib/autod\n' >>"$out"
}

install_config() {
    local new=$TMP/autod.yaml target=$ETC/autod.yaml
    render_config "$new"
    if [ ! -e "$target" ] || { [ -f "$PRISTINE" ] && cmp -s "$target" "$PRISTINE"; }; then
        # Absent, or exactly what we installed last time: safe to (re)place.
        install_file "$new" "$target" 0640
    elif cmp -s "$new" "$target"; then
        say "unchanged: $target"
    else
        install_file "$new" "$target.new" 0640
        system chown "root:$SERVICE_USER" "$target.new"
        say "kept your edited $target; the current example is $target.new (compare and merge)"
    fi
    install_file "$new" "$PRISTINE" 0644
    system chown "root:$SERVICE_USER" "$target"
}

install_credentials() {
    local dir=$ETC/credentials key=$ETC/credentials/llm_api_key
    ensure_dir "$dir" 0700
    if [ -e "$key" ]; then
        say "unchanged: $key"
    else
        (umask 077 && : >"$key")
        say "created: $key (empty: put the LLM API key in it, or leave it empty for no key)"
    fi
    chmod 0600 "$key"
    system chown -R root:root "$dir"
}

create_user() {
    if id -u "$SERVICE_USER" >/dev/null 2>&1; then
        say "unchanged: user $SERVICE_USER"
    else
        system useradd --system --user-group --home-dir /var/lib/autod --no-create-home \
            --shell /usr/sbin/nologin --comment "autod daemon" "$SERVICE_USER"
    fi
}

install_venv() {
    if [ "$NO_VENV" = 1 ]; then
        say "skipped: venv (--no-venv)"
        return
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV"
        say "created: $VENV"
    fi
    "$VENV/bin/pip" install --disable-pip-version-check --no-input --quiet "$SRC"
    say "installed: autod into $VENV"
}

# bubblewrap: checks run sandboxed under it (docs/SECURITY.md). Installed with the system's
# package manager when missing; never fatal: without it autod runs checks unsandboxed and says
# so at start-up, in `autod status` and in `autod config check`.
install_bubblewrap() {
    if command -v bwrap >/dev/null 2>&1; then
        say "unchanged: bubblewrap ($(command -v bwrap))"
        return
    fi
    local cmd=()
    if command -v apt-get >/dev/null 2>&1; then
        cmd=(apt-get install -y -qq bubblewrap)
    elif command -v dnf >/dev/null 2>&1; then
        cmd=(dnf install -y -q bubblewrap)
    elif command -v zypper >/dev/null 2>&1; then
        cmd=(zypper --non-interactive install bubblewrap)
    fi
    if [ "${#cmd[@]}" = 0 ]; then
        say "warning: bubblewrap is missing and no apt-get/dnf/zypper here: install it by hand" >&2
        return
    fi
    if [ "$LIVE" = 1 ]; then
        if [ "${cmd[0]}" = apt-get ]; then apt-get update -qq >/dev/null 2>&1 || true; fi
        if "${cmd[@]}" >/dev/null 2>&1 && command -v bwrap >/dev/null 2>&1; then
            say "installed: bubblewrap"
        else
            say "warning: could not install bubblewrap (${cmd[*]}): checks will run unsandboxed" >&2
        fi
    else
        system "${cmd[@]}"
    fi
}

# The `autod` on PATH: the venv's CLI with the environment autod.service gives the daemon,
# so `sudo -u autod autod status|logs|pause` finds the same config, state, log and socket.
# AUTOD_INSTANCE=NAME does the same for autod@NAME.service.
install_cli() {
    cat >"$TMP/autod-cli" <<EOF
#!/bin/sh
# Installed by autod's deploy/install.sh; see docs/OPERATIONS.md.
if [ -n "\${AUTOD_INSTANCE:-}" ]; then
    sub="/\$AUTOD_INSTANCE" config="/etc/autod/\$AUTOD_INSTANCE.yaml"
else
    sub="" config="/etc/autod/autod.yaml"
fi
: "\${AUTOD_CONFIG:=\$config}"
: "\${AUTOD_STATE_DIR:=/var/lib/autod\$sub}"
: "\${AUTOD_LOGGING__FILE:=/var/log/autod\$sub/autod.jsonl}"
: "\${RUNTIME_DIRECTORY:=/run/autod\$sub}"
export AUTOD_CONFIG AUTOD_STATE_DIR AUTOD_LOGGING__FILE RUNTIME_DIRECTORY
exec $PREFIX/venv/bin/autod "\$@"
EOF
    install_file "$TMP/autod-cli" "$LINK" 0755
}

do_install() {
    [ -f "$SRC/config/autod.yaml" ] || die "$SRC/config/autod.yaml not found: run from an autod checkout"
    create_user
    install_bubblewrap
    install_venv
    install_cli

    ensure_dir "$ETC" 0750
    system chown "root:$SERVICE_USER" "$ETC"
    install_config
    install_credentials
    install_file "$SRC/deploy/autod.env.example" "$ETC/autod.env.example" 0644

    render_unit "$SRC/systemd/autod.service" "$TMP/autod.service"
    install_file "$TMP/autod.service" "$UNIT_DIR/autod.service" 0644
    render_unit "$SRC/systemd/autod@.service" "$TMP/autod@.service"
    install_file "$TMP/autod@.service" "$UNIT_DIR/autod@.service" 0644
    install_file "$SRC/deploy/logrotate.autod" "$LOGROTATE" 0644
    if [ -f "$SRC/docs/OPERATIONS.md" ]; then
        install_file "$SRC/docs/OPERATIONS.md" "$ROOT_PREFIX/docs/OPERATIONS.md" 0644
    fi

    if [ "$SYSTEMD_UP" = 1 ]; then
        systemctl daemon-reload
        say "ran: systemctl daemon-reload"
    else
        say "would run: systemctl daemon-reload"
    fi
    cat <<EOF

Next:
  1. edit $ETC/autod.yaml (workspace: $WORKSPACE, checks, llm) and check it:
       sudo -u $SERVICE_USER autod config check
  2. give $SERVICE_USER write access to $WORKSPACE (group or ACL, see docs/OPERATIONS.md)
  3. put the LLM API key, if any, in $ETC/credentials/llm_api_key
  4. systemctl enable --now autod && journalctl -u autod -f
EOF
}

remove() {
    local path=$1
    if [ -e "$path" ] || [ -L "$path" ]; then
        rm -rf -- "$path"
        say "removed: $path"
    fi
}

do_uninstall() {
    if [ "$SYSTEMD_UP" = 1 ]; then
        systemctl disable --now autod.service || true
    else
        say "would run: systemctl disable --now autod.service"
    fi
    remove "$UNIT_DIR/autod.service"
    remove "$UNIT_DIR/autod@.service"
    remove "$LOGROTATE"
    remove "$ETC/autod.env.example"
    if grep -qs "autod's deploy/install.sh" "$LINK"; then
        remove "$LINK"
    fi
    remove "$VENV"
    remove "$ROOT_PREFIX/share"
    remove "$ROOT_PREFIX/docs"
    if [ -d "$ROOT_PREFIX" ]; then
        rmdir "$ROOT_PREFIX" 2>/dev/null && say "removed: $ROOT_PREFIX" || true
    fi
    if [ "$SYSTEMD_UP" = 1 ]; then
        systemctl daemon-reload
    else
        say "would run: systemctl daemon-reload"
    fi
    if [ "$PURGE" = 1 ]; then
        remove "$ETC"
        remove "$DESTDIR/var/lib/autod"
        remove "$DESTDIR/var/log/autod"
        remove "$DESTDIR/var/cache/autod"
    else
        say "kept: $ETC (config, credentials) and $DESTDIR/var/lib/autod (state, memory); --purge removes them"
    fi
    if [ "$KEEP_USER" = 1 ]; then
        say "kept: user $SERVICE_USER"
    elif id -u "$SERVICE_USER" >/dev/null 2>&1 || [ "$LIVE" = 0 ]; then
        system userdel "$SERVICE_USER"
    fi
}

if [ "$UNINSTALL" = 1 ]; then do_uninstall; else do_install; fi
