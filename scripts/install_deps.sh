#!/usr/bin/env bash
# Installs the Debian packages engramctl needs to build, test and demo. Idempotent; run as root.
#   ./scripts/install_deps.sh            build + test dependencies (what CI needs)
# Set ENGRAM_SKIP_APT=1 to skip (e.g. on a machine you manage yourself).
set -euo pipefail

if [[ "${ENGRAM_SKIP_APT:-0}" == 1 ]]; then exit 0; fi

pkgs=(
  build-essential cmake pkg-config git ca-certificates
  libcli11-dev libtomlplusplus-dev libzstd-dev libxxhash-dev doctest-dev
  libpcre2-dev libutf8proc-dev libomp-dev
  libtorch-dev libopenblas0-pthread
  python3 python3-torch python3-numpy python3-xxhash
  nodejs npm
  xxhash vmtouch zstd bc fortunes-zh
  clang libclang-rt-14-dev
  slurm-wlm munge
  libcpp-httplib-dev nlohmann-json3-dev curl chromium
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# nodejs/npm may come from elsewhere (e.g. a newer NodeSource node on PATH): accept a working one.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
filtered=()
for p in "${missing[@]}"; do [[ -n "$p" ]] && filtered+=("$p"); done

if ((${#filtered[@]})); then
  echo "install_deps: installing ${filtered[*]}" >&2
  SUDO=""
  if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${filtered[@]}" >/dev/null
fi
