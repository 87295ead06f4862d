#!/usr/bin/env bash
# nastriage scenario lab: lab/run.sh SCENARIO... [--out DIR] [--size MiB] [--snaplen N] ...
#   lab/run.sh list            scenarios, expected findings, impairments
#   lab/run.sh all --out DIR   every scenario, one after the other
#   lab/run.sh cleanup         remove leftovers of aborted runs
# Needs root and the packages of lab/install.sh. See lab/README.md.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${LAB_PYTHON:-python3}"
tag=$$
case "${1:-list}" in
  list|cleanup|-h|--help) exec "$py" "$here/lab.py" --tag "$tag" "$@" ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "lab/run.sh: must run as root" >&2
  exit 2
fi
cleanup() {
  # lab.py cleans up after itself; this catches what a killed lab.py left
  "$py" "$here/lab.py" cleanup --tag "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$py" "$here/lab.py" --tag "$tag" "$@"
rc=$?
exit $rc
