#!/usr/bin/env bash
# Install what the scenario lab needs (Debian 12; idempotent; run as root).
#   lab/install.sh          install missing packages
#   lab/install.sh --check  only report what is missing (exit 1 if anything is)
set -euo pipefail
pkgs=(samba smbclient nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-utils tcpdump tshark
      iproute2 ethtool util-linux procps python3 iperf3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${1:-}" = "--check" ]; then
  if [ ${#missing[@]} -gt 0 ]; then echo "missing: ${missing[*]}"; exit 1; fi
  echo "all lab packages installed"; exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "lab/install.sh: run as root" >&2; exit 2; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # tshark asks whether non-root users may capture: keep the default (no)
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Host copies of smbd/rpcbind (if the packages started any) do not matter: the
# lab's servers run in their own network namespace with a private /run.
echo "lab packages ready: ${pkgs[*]}"
