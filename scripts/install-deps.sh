#!/usr/bin/env bash
# Installs the Debian packages Kiln's tests use: QEMU and qemu-img for images
# and test machines, PostgreSQL for the multi-controller store, disk tools used
# as oracles (wipefs, blkid, sgdisk), and ISO/firmware pieces for network boot.
# Run it as root, or as a user with sudo (it then calls sudo itself); a
# fresh Debian machine has no sudo, and root needs none. Safe to run again.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps.sh: run it as root (su -c scripts/install-deps.sh): not root, and sudo is not installed" >&2
    exit 1
  fi
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
  make git ca-certificates curl \
  qemu-utils qemu-system-x86 ipxe-qemu ovmf \
  postgresql \
  util-linux fdisk gdisk dosfstools e2fsprogs xfsprogs btrfs-progs mdadm lvm2 \
  zstd xz-utils cpio kmod xorriso genisoimage mtools \
  syslinux syslinux-common systemd-boot-efi binutils \
  ironic-api ironic-conductor python3-ironicclient \
  ipxe dnsmasq-base python3-sushy chromium fonts-dejavu-core \
  iproute2 wrk >/dev/null
