#!/usr/bin/env bash
# Build the kernel + initramfs of the Soft-RoCE (rdma_rxe) test VM.
#
# Usage: tests/rxe/build-image.sh [--cache DIR] [--force] [--keep] [--print-dir]
#
#   --cache DIR   image cache (default: $KV_VM_CACHE, else /var/tmp/kvstore-rxe-vm)
#   --force       rebuild even if the cached images are up to date
#   --keep        keep the extracted kernel package (~370 MB) in DIR/kernel-tree
#   --print-dir   only print the cache directory and exit
#   -h, --help    this text
#
# Produces DIR/vmlinuz, DIR/initrd.gz and DIR/stamp.  The initramfs also holds
# the modules dockerd needs; vm-init loads them only for vm-run.sh --docker.  Idempotent: when both
# images exist and DIR/stamp holds the same key (a SHA-256 of this script,
# tests/rxe/vm-init and the KV_VM_* overrides below), nothing is done.
# Concurrent callers are serialised with flock on DIR/.lock.
#
# How: the Debian kernel package that `linux-image-amd64` depends on is fetched
# with `apt-get download` (kept in DIR/debs for offline rebuilds), unpacked with
# dpkg-deb, and the modules the VM needs are resolved from each module's
# .modinfo "depends=" string (the .deb has no modules.dep and the host needs no
# kmod/depmod).  The initramfs holds busybox-static, the modules, their load
# order and tests/rxe/vm-init as /init; it is packed with `busybox cpio`.
#
# Environment overrides (all part of the cache key):
#   KV_VM_KERNEL_PKG=linux-image-6.1.0-NN-amd64  pin the kernel package
#   KV_VM_KERNEL_DEB=/path/linux-image-....deb    use this .deb, no download
#   KV_VM_EXTRA_MODULES="mod1 mod2"               load these modules too
#
# Exit status: 0 built or up to date; 1 failure; 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${KV_VM_CACHE:-/var/tmp/kvstore-rxe-vm}
FORCE=0
KEEP=0
PRINT_DIR=0

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
log() { echo "build-image: $*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

while (($#)); do
    case "$1" in
    --cache)
        CACHE=${2:?--cache needs a directory}
        shift 2
        ;;
    --force) FORCE=1 && shift ;;
    --keep) KEEP=1 && shift ;;
    --print-dir) PRINT_DIR=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *)
        log "unknown argument: $1 (see --help)"
        exit 2
        ;;
    esac
done

if ((PRINT_DIR)); then
    echo "$CACHE"
    exit 0
fi

# Modules wanted in the guest; their dependencies are added automatically.
#   virtio_pci virtio_net       the NIC (eth0)
#   9pnet_virtio 9p overlay     host root over virtio-9p with a RAM overlay
#   crc32_generic               rdma_rxe allocates the "crc32" shash when a link
#                               is added; the kernel would request_module() it,
#                               but there is no modprobe in the guest, so without
#                               it `rdma link add` fails with ENOENT
#   rdma_rxe ib_uverbs          Soft-RoCE and the verbs user interface
#   rdma_ucm ib_umad            rdma_cm from user space, MAD access
WANT_MODULES=(virtio_pci virtio_net 9pnet_virtio 9p overlay crc32_generic
    rdma_rxe ib_uverbs rdma_ucm ib_umad)
read -r -a EXTRA <<<"${KV_VM_EXTRA_MODULES:-}"
WANT_MODULES+=("${EXTRA[@]}")
# What dockerd needs in the guest (vm-run.sh --docker), in the same image but
# loaded only when the kernel command line says kvvm.docker=1, so the plain
# boot of the RDMA suite loads exactly what it did before.
#   crc32c_generic              libcrc32c (nf_conntrack, nf_nat) asks the crypto
#                               API for crc32c; no modprobe, so load it first
#   bridge veth                 docker's bridge networks (dockerd refuses to
#                               start without a bridge driver)
#   nf_tables nft_compat nft_chain_nat xt_nat
#                               the embedded DNS of user networks: dockerd
#                               redirects 127.0.0.11:53 with iptables(-nft)
#                               rules in each container even with
#                               --iptables=false, and compose finds services
#                               by name through it
DOCKER_MODULES=(crc32c_generic bridge veth nf_tables nft_compat nft_chain_nat xt_nat)

# Cache key: everything that changes the produced images.
key=$({
    cat "${BASH_SOURCE[0]}" "$HERE/vm-init"
    echo "pkg=${KV_VM_KERNEL_PKG:-} deb=${KV_VM_KERNEL_DEB:-} extra=${KV_VM_EXTRA_MODULES:-}"
} | sha256sum | cut -d' ' -f1)

mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

up_to_date() {
    [[ -s $CACHE/vmlinuz && -s $CACHE/initrd.gz && -f $CACHE/stamp ]] &&
        grep -qx "key=$key" "$CACHE/stamp"
}

# Fast path without the lock.
if ((!FORCE)) && up_to_date; then
    log "up to date: $CACHE ($(grep '^kernel=' "$CACHE/stamp" | cut -d= -f2))"
    exit 0
fi

exec 9>"$CACHE/.lock"
flock 9
# Somebody else may have built it while we waited.
if ((!FORCE)) && up_to_date; then
    log "up to date: $CACHE (built by a concurrent run)"
    exit 0
fi

for tool in dpkg-deb gzip sha256sum; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
# busybox-static's /bin/busybox runs in the initramfs, which has no libc
if [[ ! -x /bin/busybox ]] || [[ $(LC_ALL=C ldd /bin/busybox 2>&1 || true) != *"not a dynamic executable"* ]]; then
    die "/bin/busybox missing or not static: install busybox-static (deploy/setup.sh does)"
fi

now_ms() { echo $(($(date +%s%N) / 1000000)); }
t_start=$(now_ms)
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# --- 1. the kernel package ---------------------------------------------------
if [[ -n ${KV_VM_KERNEL_DEB:-} ]]; then
    DEB=$(readlink -f "$KV_VM_KERNEL_DEB")
    [[ -f $DEB ]] || die "KV_VM_KERNEL_DEB=$KV_VM_KERNEL_DEB not found"
else
    resolve_pkg() {
        apt-cache depends linux-image-amd64 2>/dev/null |
            awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}'
    }
    PKG=${KV_VM_KERNEL_PKG:-$(resolve_pkg || true)}
    if [[ -z $PKG && $(id -u) -eq 0 ]]; then
        # A fresh machine may have no package lists yet.
        log "apt-cache knows no linux-image-amd64; running apt-get update"
        apt-get update -qq >&2 || true
        PKG=$(resolve_pkg || true)
    fi
    # Offline fallback: the newest .deb downloaded earlier.
    if [[ -z $PKG ]]; then
        DEB=$(ls -t "$CACHE"/debs/linux-image-*.deb 2>/dev/null | head -1 || true)
        [[ -n $DEB ]] || die "cannot tell which kernel package linux-image-amd64 depends on (apt-get update?)"
        log "apt metadata unavailable; reusing $DEB"
    else
        mkdir -p "$CACHE/debs"
        DEB=$(ls "$CACHE/debs/${PKG}_"*.deb 2>/dev/null | head -1 || true)
        if [[ -z $DEB ]]; then
            log "downloading $PKG"
            # APT::Sandbox::User=root: the _apt user may not write here; this
            # also avoids apt's "unsandboxed as root" warning.
            (cd "$WORK" && apt-get download -q -o APT::Sandbox::User=root "$PKG" >&2) ||
                die "apt-get download $PKG failed"
            DEB=$(ls "$WORK/${PKG}_"*.deb | head -1)
            # keep only the current package for offline rebuilds
            rm -f "$CACHE"/debs/linux-image-*.deb
            mv "$DEB" "$CACHE/debs/"
            DEB=$CACHE/debs/${DEB##*/}
        fi
    fi
fi
log "kernel package: ${DEB##*/}"

# --- 2. unpack ---------------------------------------------------------------
TREE=$WORK/tree
dpkg-deb -x "$DEB" "$TREE"
MODROOT=$(ls -d "$TREE"/lib/modules/*/ 2>/dev/null | head -1)
[[ -n $MODROOT ]] || die "no lib/modules in $DEB"
MODROOT=${MODROOT%/}
KVER=${MODROOT##*/}
[[ -f $TREE/boot/vmlinuz-$KVER ]] || die "no boot/vmlinuz-$KVER in $DEB"
# The status channel of vm-init is the second UART: it must be built in.
if [[ -f $TREE/boot/config-$KVER ]] && ! grep -qx 'CONFIG_SERIAL_8250=y' "$TREE/boot/config-$KVER"; then
    die "kernel $KVER lacks CONFIG_SERIAL_8250=y (needed for the console and status port)"
fi

# --- 3. module dependencies, from .modinfo -----------------------------------
declare -A MODPATH=()
while IFS= read -r f; do
    name=${f##*/}
    name=${name%%.ko*}
    MODPATH[${name//-/_}]=$f
done < <(find "$MODROOT/kernel" -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz')

# cat a module, decompressed (busybox insmod takes plain .ko only)
module_bytes() {
    case "$1" in
    *.xz) xz -dc "$1" ;;
    *.zst) zstd -qdc "$1" ;;
    *.gz) gzip -dc "$1" ;;
    *) cat "$1" ;;
    esac
}
# the comma-separated "depends=" value of the .modinfo section, as words
module_deps() {
    module_bytes "${MODPATH[$1]}" | tr '\0' '\n' | grep -a -m1 '^depends=' |
        cut -d= -f2 | tr ',' ' ' || true
}
is_builtin() { grep -q "/$1\.ko\$" "$MODROOT/modules.builtin" 2>/dev/null; }

declare -A VISITED=()
ORDER=()
# depth-first: dependencies land in ORDER before the modules that need them
visit() {
    local mod=${1//-/_} dep
    [[ -n ${VISITED[$mod]:-} ]] && return 0
    VISITED[$mod]=1
    if [[ -z ${MODPATH[$mod]:-} ]]; then
        is_builtin "$mod" && return 0
        die "module $mod is neither in the package nor built in"
    fi
    for dep in $(module_deps "$mod"); do
        visit "$dep"
    done
    ORDER+=("$mod")
}
for m in "${WANT_MODULES[@]}"; do
    visit "$m"
done
log "${#ORDER[@]} modules: ${ORDER[*]}"
BASE_COUNT=${#ORDER[@]}
for m in "${DOCKER_MODULES[@]}"; do
    visit "$m"
done
DOCKER_ORDER=("${ORDER[@]:BASE_COUNT}")
log "${#DOCKER_ORDER[@]} more for --docker: ${DOCKER_ORDER[*]}"

# --- 4. initramfs ------------------------------------------------------------
ROOT=$WORK/initramfs
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,run,lower,upper,newroot,lib/modules}
cp /bin/busybox "$ROOT/bin/busybox"
for applet in sh mount umount insmod mkdir ip cat cut grep echo sleep sync \
    poweroff chroot mknod ln ls tr; do
    ln -s busybox "$ROOT/bin/$applet"
done
# The kernel opens /dev/console before /init runs; only root may mknod.
if [[ $(id -u) -eq 0 ]]; then
    mknod -m 600 "$ROOT/dev/console" c 5 1
else
    log "not root: no /dev/console node in the initramfs (early messages are lost)"
fi
for m in "${ORDER[@]}"; do
    module_bytes "${MODPATH[$m]}" >"$ROOT/lib/modules/$m.ko"
done
printf '%s\n' "${ORDER[@]:0:BASE_COUNT}" >"$ROOT/lib/modules/load-order"
printf '%s\n' "${DOCKER_ORDER[@]}" >"$ROOT/lib/modules/load-order-docker"
install -m 0755 "$HERE/vm-init" "$ROOT/init"
(cd "$ROOT" && find . | LC_ALL=C sort | busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -1) \
    >"$WORK/initrd.gz"
cp "$TREE/boot/vmlinuz-$KVER" "$WORK/vmlinuz"

# --- 5. publish atomically -----------------------------------------------------
if ((KEEP)); then
    rm -rf "$CACHE/kernel-tree"
    mv "$TREE" "$CACHE/kernel-tree"
fi
mv -f "$WORK/vmlinuz" "$CACHE/vmlinuz"
mv -f "$WORK/initrd.gz" "$CACHE/initrd.gz"
{
    echo "key=$key"
    echo "kernel=$KVER"
    echo "deb=${DEB##*/}"
    echo "modules=${ORDER[*]:0:BASE_COUNT}"
    echo "docker_modules=${DOCKER_ORDER[*]}"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$CACHE/stamp"
ms=$(($(now_ms) - t_start))
log "built $CACHE/vmlinuz ($KVER) + initrd.gz ($(du -h "$CACHE/initrd.gz" | cut -f1)) in $((ms / 1000)).$((ms % 1000 / 100))s"
