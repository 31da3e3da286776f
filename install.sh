#!/usr/bin/env bash
# Installs what rtemu needs on Debian/Ubuntu and builds it.
# System packages: iproute2 (netem's distribution tables, `ip netns`), a C toolchain for
# the build, pkg-config, and the programs the root tests and `rtemu demo` run inside lab
# nodes: ping, traceroute, iperf3 and BIRD 2 (the OSPF example), Graphviz (`rtemu graph
# --format svg`), a font for the text of `rtemu lab … --plot FILE.png` (DejaVu), and Chromium
# with its WebDriver (chromium, chromium-driver) for the web view's browser tests, and venv for
# the distribution's Python (python3-venv: ./test.sh runs the Python tests in a virtual
# environment), Node.js, whose test runner runs the web page's unit tests, Prometheus (the
# metrics test scrapes a lab with a Prometheus of its own, on loopback), and for nodes that run
# container images: rootful podman with runc (works on cgroup v1, hybrid and v2; rtemu passes
# its options per command and changes no podman configuration) and busybox-static, which the
# container tests build their images from. Rust comes from rustup when cargo is missing.
set -euo pipefail
cd "$(dirname "$0")"

need=()
for pkg in iproute2 build-essential pkg-config iputils-ping traceroute iperf3 bird2 graphviz fonts-dejavu-core chromium chromium-driver python3-venv nodejs prometheus podman runc busybox-static; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
  # Debian's package starts and enables a Prometheus on every address (:9090): the one this
  # script brought is stopped and disabled (systemd or SysV init), so installing opens no port.
  if [[ " ${need[*]} " == *" prometheus "* ]]; then
    if [ -d /run/systemd/system ]; then
      $SUDO systemctl disable --now prometheus.service
    elif [ -x /etc/init.d/prometheus ]; then
      $SUDO /etc/init.d/prometheus stop || true
      $SUDO update-rc.d prometheus disable || true
    fi
  fi
fi

# Rust: rtemu needs 1.85 or newer, more than Debian's own package offers, so it comes from
# rustup (the official installer) when cargo is missing.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  if ! command -v curl >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl ca-certificates
  fi
  echo "install.sh: cargo not found: installing Rust with rustup (https://rustup.rs)" >&2
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  export PATH="$HOME/.cargo/bin:$PATH"
fi

cargo build --release --workspace
echo "install.sh: built target/release/rtemu"
