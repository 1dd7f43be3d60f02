# Shared by scripts/test.sh and scripts/example.sh (sourced, not run): progress lines,
# Debian packages installed without starting or enabling their services, the virtualenv, pip.

_started=$SECONDS

# One progress line: "== [ 12s] what is being done".
step() { printf '== [%4ds] %s\n' "$((SECONDS - _started))" "$*"; }

is_root() { [ "$(id -u)" = 0 ]; }
can_apt() { is_root && command -v apt-get >/dev/null 2>&1; }

# found PROBE...: true when one probe is a command on PATH or a file (globs allowed).
found() {
  local probe match
  for probe in "$@"; do
    command -v "$probe" >/dev/null 2>&1 && return 0
    for match in $probe; do [ -e "$match" ] && return 0; done
  done
  return 1
}

# apt_install PACKAGE...: install Debian packages (as root) without their recommendations, and
# without starting or enabling the services they bring: the tests start their own servers, as
# the user running them, on free loopback ports. A machine's own services are left alone: only
# packages that were not installed are installed, and only the services of those are disabled.
apt_install() {
  local new=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || new+=("$package")
  done
  [ "${#new[@]}" -gt 0 ] || return 0
  local policy=/usr/sbin/policy-rc.d made_policy="" cluster_dir=/etc/postgresql-common/createcluster.d
  local no_cluster="$cluster_dir/zz-bailing-tests-no-main-cluster.conf" made_dir=""
  if [ ! -e "$policy" ]; then  # "101: action not allowed": no service starts during the install
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
  fi
  if [ ! -d "$cluster_dir" ]; then mkdir -p "$cluster_dir" && made_dir=1; fi
  if [ ! -e "$no_cluster" ]; then  # a PostgreSQL server package would create (and boot) a cluster
    echo "create_main_cluster = off" >"$no_cluster"
  else
    no_cluster=""
  fi
  local status=0 before
  before=$(_installed_packages)
  step "apt: updating the package lists"
  apt-get update -qq || status=$?
  if [ "$status" = 0 ]; then
    step "apt: installing ${new[*]} (--no-install-recommends; no service is started or enabled)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${new[@]}" 2>&1 \
      | awk '/^(Setting up|E:|W:)/ { print "   apt: " $0; fflush() }' || status=$?
  fi
  [ -z "$made_policy" ] || rm -f "$policy"
  [ -z "$no_cluster" ] || rm -f "$no_cluster"
  [ -z "$made_dir" ] || rmdir "$cluster_dir" 2>/dev/null || true
  [ "$status" = 0 ] || { echo "apt-get failed (exit $status)" >&2; return "$status"; }
  # every package this install added (dependencies too: postgresql's service is postgresql-common's)
  local added
  mapfile -t added < <(comm -13 <(echo "$before") <(_installed_packages))
  _disable_services "${added[@]}"
}

_installed_packages() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$1 == "ii" { print $2 }' | sort
}

# The systemd units and init scripts the packages just installed would run at boot: disabled.
_disable_services() {
  local package file unit
  [ "$#" -gt 0 ] || return 0
  for package in "$@"; do
    while read -r file; do
      case "$file" in
        /lib/systemd/system/*.service|/usr/lib/systemd/system/*.service)
          unit=${file##*/}
          case "$unit" in *@.service) continue ;; esac
          if command -v systemctl >/dev/null 2>&1; then systemctl disable --quiet "$unit" 2>/dev/null || true; fi ;;
        /etc/init.d/*)
          if command -v update-rc.d >/dev/null 2>&1; then update-rc.d "${file##*/}" disable >/dev/null 2>&1 || true; fi ;;
      esac
    done < <(dpkg-query -L "$package" 2>/dev/null)
  done
}

# make_venv DIR PYTHON: a virtualenv in DIR made by PYTHON, if there is none yet. Debian's own
# python3 needs its pythonX.Y-venv package for that (ensurepip); as root it is installed.
make_venv() {
  local venv=$1 python=$2
  if [ -x "$venv/bin/python" ]; then
    # an existing one is kept: say so when it was made by another interpreter than the one asked for
    local have want
    have=$("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo "?")
    want=$("$python" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo "?")
    if [ "$have" != "$want" ]; then
      step "venv: keeping $venv (Python $have), not $python (Python $want): delete $venv to make it anew"
    fi
    return 0
  fi
  if ! command -v "$python" >/dev/null 2>&1; then
    if [ "$python" = python3 ] && can_apt; then
      apt_install python3 python3-venv
    else
      echo "no $python found: install Python 3.10 or newer (Debian: apt-get install python3 python3-venv)" >&2
      return 1
    fi
  fi
  step "venv: creating $venv with $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  if "$python" -m venv "$venv" >/dev/null 2>&1; then return 0; fi
  rm -rf "$venv"  # a half-made one (no pip): Debian's python3 without its venv package
  local debian
  debian=$("$python" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])')
  if can_apt && dpkg-query -S "$(command -v "$python")" >/dev/null 2>&1; then
    apt_install "$debian"
    "$python" -m venv "$venv"
  else
    echo "$python cannot create a virtualenv; on Debian, install $debian (as root: apt-get install $debian)" >&2
    return 1
  fi
}

# pip_install VENV ARG...: pip install into the virtualenv, printing what it fetches and builds;
# the whole output is kept in VENV/pip-install.log, and its end is shown if pip fails.
pip_install() {
  local venv=$1; shift
  local log="$venv/pip-install.log" status=0
  step "pip: installing $* into $venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
    | tee "$log" \
    | awk '/^ *(Collecting|Building wheel|Running setup.py install|Successfully|ERROR)/ { print "   pip: " $0; fflush() }' \
    || status=$?
  if [ "$status" != 0 ]; then
    echo "pip failed (exit $status); the end of $log:" >&2
    tail -n 30 "$log" >&2
    return "$status"
  fi
  step "pip: done"
}
