"""Whether the scenario lab can run here (root, its packages, network
namespaces); shared by every test that starts lab scenarios."""

from __future__ import annotations

import os
import shutil
import subprocess

#: Commands the lab needs (installed by lab/install.sh).
TOOLS = ("smbd", "smbclient", "ganesha.nfsd", "rpcbind", "nfs-cp", "tcpdump", "ip", "ethtool")


def lab_unavailable() -> str | None:
    """Why the lab cannot run here, or None when it can."""
    if os.environ.get("NASTRIAGE_LAB") == "0":
        return "NASTRIAGE_LAB=0"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the lab needs root"
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        return f"lab packages missing ({', '.join(missing)}): run lab/install.sh"
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10)
    if r.returncode != 0:
        return "ip netns does not work here"
    return None
