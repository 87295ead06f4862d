#!/usr/bin/env bash
# Regenerate the small example captures in examples/ (repo root) from the lab:
# client-side captures, snaplen 256, gzip -9, each with its label.
#   examples/nfs3-healthy-lan.pcap.gz     NFSv3 read (nfs-cp), 1 Gbit/s LAN
#   examples/smb2-healthy-lan.pcap.gz     SMB2 read (smbclient), 1 Gbit/s LAN
#   examples/nfs3-receiver-stall.pcap.gz  NFSv3 write, 16 outstanding, ganesha stalls
# Needs root and lab/install.sh. Takes about 15 s.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="$(dirname "$here")/examples"
work="$(mktemp -d /tmp/nastriage-examples.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"
common=(--size 2 --snaplen 256 --out "$work")
"$here/run.sh" nfs3-healthy-lan smb2-healthy-lan "${common[@]}"
# at 20 Mbit/s the 2 MiB write lasts long enough for a 0.8 s stall to hit it
"$here/run.sh" nfs3-receiver-stall "${common[@]}" --set tbf.client=20 \
  --set starve.first_run_ms=150 --set starve.stop_ms=800
for s in nfs3-healthy-lan smb2-healthy-lan nfs3-receiver-stall; do
  gzip -9 -n -c "$work/$s/client.pcap" > "$dest/$s.pcap.gz"
  python3 - "$work/$s/label.json" "$dest/$s.label.json" "$s.pcap.gz" <<'PY'
import json, sys
label = json.load(open(sys.argv[1]))
label["example"] = {"file": sys.argv[3], "capture": "client",
                    "note": "client-side capture of the lab scenario, snaplen 256, gzip"}
json.dump(label, open(sys.argv[2], "w"), indent=2)
open(sys.argv[2], "a").write("\n")
PY
  echo "$dest/$s.pcap.gz: $(stat -c %s "$dest/$s.pcap.gz") bytes"
done
