#!/bin/sh
# The guest's init after the image's /sbin/harness-init: the kernel state of the environment
# (its sysctls, its AppArmor profiles), the host's root at /host, the network the agent listens
# on, then the agent. Written by the harness into its share for each boot (sandbox::kvm::machine);
# /run/harness/boot.env names the environment's settings.
set -u
say() { echo "harness-guest: $*" >/dev/console; }
# An init that ends panics the kernel, and QEMU (-no-reboot) exits: the host reads why here.
fail() { say "$*"; exit 1; }
. /run/harness/boot.env

mountpoint -q /sys/kernel/security || mount -t securityfs securityfs /sys/kernel/security
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mountpoint -q /dev/pts || mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mountpoint -q /dev/shm || mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap host /host ||
    fail "the host share is missing"

ip link set lo up
modprobe -q virtio_net
nic=$(ls /sys/class/net | grep -v '^lo$' | head -n 1)
ip link set "$nic" up && ip addr add 10.0.2.15/24 dev "$nic" || fail "no network device for the agent"

for profile in $HARNESS_APPARMOR_PROFILES; do
    apparmor_parser --replace --skip-cache "$profile" 2>/dev/console ||
        fail "AppArmor profile $profile did not load"
done
for setting in $HARNESS_SYSCTLS; do
    echo "${setting#*=}" >"/proc/sys/$(echo "${setting%%=*}" | tr . /)" ||
        fail "sysctl $setting could not be set"
done
say "ready: kernel $(uname -r), lsm $(cat /sys/kernel/security/lsm)"
exec python3 -I /run/harness/agent.py
