# Shared by scripts/serve, scripts/test and .ci/run (sourced, not run): makes sure the system
# libraries the build links against are here, installing them with apt-get when this is a
# Debian machine and we are root, and otherwise saying exactly what to install.
#
#   libxmlsec1-dev, libxml2-dev, libssl-dev   XML signatures of SAML responses (gatehouse-saml,
#                                             through samael and Debian's xmlsec1 library)
#   libclang-dev, pkg-config                  samael's bindings are generated at build time

say() { printf '==> %s\n' "$*" >&2; }
missing() {
  printf '%s: %s\n' "$(basename "$0")" "$*" >&2
  exit 1
}
apt_install() {
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing $* (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    missing "this needs $*: install it (on Debian or Ubuntu: sudo apt-get install $*)"
  fi
}

# Whether a Debian package is installed (always "no" where there is no dpkg).
have_package() {
  command -v dpkg-query >/dev/null 2>&1 \
    && [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

ensure_build_deps() {
  local wanted=()
  if command -v dpkg-query >/dev/null 2>&1; then
    for package in pkg-config libxmlsec1-dev libxml2-dev libssl-dev libclang-dev; do
      have_package "$package" || wanted+=("$package")
    done
  elif ! pkg-config --exists xmlsec1-openssl 2>/dev/null; then
    missing "the build needs libxmlsec1 (with OpenSSL), libxml2 and libclang with their headers, and pkg-config"
  fi
  if [ ${#wanted[@]} -gt 0 ]; then
    apt_install "${wanted[@]}"
  fi
}
