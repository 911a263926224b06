#!/usr/bin/env bash
# Installs the benchmark peers of flock bench --peer torch2, torch2-compile,
# ffcv and torchft, and the official safetensors package of the interop
# test, into a virtual environment based on Debian's /usr/bin/python3:
# .cache/peers/venv in the repository root, or $FLOCK_PEERS_VENV. Versions
# are pinned in bench/peers/requirements.txt. None of this is a dependency
# of flock.
#
# Idempotent: a second run finds the environment up to date (a stamp holds
# the requirements' checksum) and installs nothing. It needs root (or sudo)
# only for the Debian packages FFCV's C extension builds against, when they
# are missing. The PyTorch wheels are CUDA builds (several GB with the
# nvidia-* libraries); the peers run on the CPU.
#
# Prints the path of the environment's python on its last line.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${FLOCK_PEERS_VENV:-$root/.cache/peers/venv}
req=$root/bench/peers/requirements.txt
stamp=$venv/.flock-peers
want=$(sha256sum <"$req" | cut -d' ' -f1)

if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then
	echo "peers: up to date" >&2
	echo "$venv/bin/python"
	exit 0
fi

# Debian packages: venv, FFCV's build (OpenCV, libjpeg-turbo, pkg-config)
# and torch.compile's C++ compiler.
debs=(python3-venv libopencv-dev libturbojpeg0-dev pkg-config g++)
missing=()
for d in "${debs[@]}"; do
	dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' || missing+=("$d")
done
if ((${#missing[@]})); then
	sudo=()
	((EUID == 0)) || sudo=(sudo)
	echo "peers: apt-get install ${missing[*]}" >&2
	if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; then
		"${sudo[@]}" apt-get update
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
	fi
fi

if [[ ! -x $venv/bin/python ]]; then
	mkdir -p "$(dirname "$venv")"
	/usr/bin/python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
# FFCV is a source distribution whose setup.py imports distutils and
# setuptools: it builds against the pinned setuptools below, not one that
# pip would pick for an isolated build.
"${pip[@]}" install "$(grep -E '^setuptools==' "$req")" "$(grep -E '^wheel==' "$req")"
"${pip[@]}" install --no-build-isolation -r "$req"
"${pip[@]}" check
"$venv/bin/python" - <<'EOF' >&2
import ffcv, safetensors, torch, torchft, torchvision
from importlib.metadata import version
print("peers: torch", torch.__version__, "torchvision", torchvision.__version__,
      "ffcv", version("ffcv"), "torchft", version("torchft"), "safetensors", safetensors.__version__)
EOF
echo "$want" >"$stamp"
echo "$venv/bin/python"
