# Shared by tools/stepsim and tools/test: install what is missing (Debian 12 packages only),
# configure and build. Quiet when nothing needs doing; shows the log when a step fails.
# Source it; it defines stepsim_setup TARGET... (no targets = everything).

STEPSIM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STEPSIM_BUILD="${STEPSIM_BUILD:-$STEPSIM_ROOT/build}"
STEPSIM_PACKAGES=(g++ meson ninja-build pkg-config python3 libsimgrid-dev libeigen3-dev
  libyaml-cpp-dev libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev zlib1g-dev python3-yaml)

stepsim_missing_packages() {
  local pkg missing=()
  for pkg in "${STEPSIM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  echo "${missing[@]}"
}

stepsim_install_packages() {
  local missing
  missing=$(stepsim_missing_packages)
  [ -z "$missing" ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "stepsim: missing Debian packages: $missing" >&2
      echo "stepsim: run as root: apt-get install -y $missing" >&2
      return 1
    fi
  fi
  echo "stepsim: installing Debian packages: $missing" >&2
  local log="/tmp/stepsim-apt.$$.log"
  if ! { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "stepsim: package installation failed (log above)" >&2
    return 1
  fi
  rm -f "$log"
}

# stepsim_build [ninja targets...]: configure once, then build (ninja is a no-op when fresh).
stepsim_build() {
  local log="$STEPSIM_BUILD/stepsim-setup.log"
  mkdir -p "$STEPSIM_BUILD"
  if [ ! -f "$STEPSIM_BUILD/build.ninja" ]; then
    if ! meson setup "$STEPSIM_BUILD" "$STEPSIM_ROOT" >"$log" 2>&1; then
      cat "$log" >&2; echo "stepsim: meson setup failed (log above)" >&2; return 1
    fi
  fi
  if ! ninja -C "$STEPSIM_BUILD" "$@" >"$log" 2>&1; then
    cat "$log" >&2; echo "stepsim: build failed (log above)" >&2; return 1
  fi
}

stepsim_setup() {
  stepsim_install_packages && stepsim_build "$@"
}
