#!/usr/bin/env bash
# Builds the compose cluster's images on this machine, from nothing: no base
# image, no registry.  Each image is a root file system assembled here (the
# binaries, the shared libraries `ldd` says they load, what they dlopen, a
# static busybox for a shell and health checks) and loaded with
# `docker import`.
#
# Usage: deploy/compose/build-images.sh [--force] [--bin DIR] [--save DIR] [IMAGE...]
#        deploy/compose/build-images.sh --load DIR [--force] [IMAGE...]
#
#   IMAGE       kvstore-server | kvstore-client | kvstore-etcd |
#               kvstore-prometheus (default: all four)
#   --bin DIR   where kvserver and kvctl are (default: bazel-bin of the
#               repository; `bazel build //server:kvserver
#               //client/kvctl:kvctl` makes them)
#   --force     import even when the image is up to date
#   --save DIR  no docker needed: write each image's root file system as
#               DIR/NAME.tar with DIR/NAME.key (its inputs key) and
#               DIR/NAME.changes (its `docker import -c` lines) instead of
#               importing it; a tar whose key matches is kept.  When both
#               kvstore-server and kvstore-client are asked for, one tar
#               holds both (kvstore-client.same: load it as a tag)
#   --load DIR  import DIR/NAME.tar written by --save into this dockerd,
#               unless the image there has the same key (the Soft-RoCE VM
#               does this: assembling images through its 9p root is slow)
#
# An image is rebuilt only when what goes into it changed: every image carries
# a label kvstore.inputs = a sha256 over this script, the contents of its
# programs and the path, size and mtime of the libraries it takes from the
# host; an image whose label matches is kept.  Prints one line per image:
# built or up to date, and its size.
#
# Images (tag :latest):
#   kvstore-server      kvserver, kvctl and redis-cli (its health checks over
#                       TLS), libibverbs and every provider (rxe, mlx5, ...),
#                       busybox
#   kvstore-client      kvctl, redis-cli (Debian's redis-tools), busybox, and
#                       chaos_load when bazel-bin has it (deploy/compose/chaos.sh)
#   kvstore-etcd        Debian's etcd and etcdctl (etcd-server, etcd-client),
#                       busybox
#   kvstore-prometheus  Debian's prometheus, busybox
#
# Exit status: 0 done; 1 a binary or package is missing, or docker failed;
# 2 bad usage.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$REPO/bazel-bin
FORCE=0
SAVE=""
LOAD=""
IMAGES=()
ALL=(kvstore-server kvstore-client kvstore-etcd kvstore-prometheus)
export DOCKER_API_VERSION=${DOCKER_API_VERSION:-1.41} # client 28.x vs Debian's dockerd 20.10

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() {
    echo "build-images: $*" >&2
    exit 1
}
while (($#)); do
    case $1 in
    --force) FORCE=1 ;;
    --bin) BIN=${2:?--bin needs a directory} && shift ;;
    --bin=*) BIN=${1#*=} ;;
    --save) SAVE=${2:?--save needs a directory} && shift ;;
    --load) LOAD=${2:?--load needs a directory} && shift ;;
    -h | --help) usage && exit 0 ;;
    kvstore-server | kvstore-client | kvstore-etcd | kvstore-prometheus) IMAGES+=("$1") ;;
    *)
        echo "build-images: unknown argument $1 (see --help)" >&2
        exit 2
        ;;
    esac
    shift
done
((${#IMAGES[@]})) || IMAGES=("${ALL[@]}")
if [[ -z $SAVE ]]; then
    command -v docker >/dev/null || die "no docker client (deploy/setup.sh installs docker.io)"
    docker info >/dev/null 2>&1 || die "dockerd is not answering (deploy/cluster.sh up starts it)"
else
    mkdir -p "$SAVE"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvimg.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# need FILE...: every file exists, or say which package has it.
need() {
    local f
    for f; do
        [[ -e $f ]] || die "missing $f ($(need_hint "$f"))"
    done
}
need_hint() {
    case $1 in
    */kvserver | */kvctl) echo "run: bazel build //server:kvserver //client/kvctl:kvctl" ;;
    */busybox) echo "apt-get install busybox-static" ;;
    */redis-cli) echo "apt-get install redis-tools" ;;
    */etcd) echo "apt-get install etcd-server" ;;
    */etcdctl) echo "apt-get install etcd-client" ;;
    */prometheus) echo "apt-get install prometheus" ;;
    *) echo "deploy/setup.sh installs it" ;;
    esac
}

# new_root DIR: the skeleton.  Debian 12 is merged-/usr, so /lib and /bin are
# links into /usr and a library copied to its ldd path lands in /usr/lib.
new_root() {
    local r=$1
    mkdir -p "$r"/usr/{bin,lib/x86_64-linux-gnu} "$r"/{lib64,etc,tmp,data,run/secrets}
    ln -s usr/bin "$r/bin"
    ln -s usr/bin "$r/sbin"
    ln -s usr/lib "$r/lib"
    chmod 1777 "$r/tmp"
    echo 'root:x:0:0:root:/:/bin/sh' >"$r/etc/passwd"
    echo 'root:x:0:' >"$r/etc/group"
    echo 'hosts: files dns' >"$r/etc/nsswitch.conf"
    # busybox and its applets (sh, nc, wget, sleep, ...) as symlinks
    cp /bin/busybox "$r/usr/bin/busybox"
    local a
    for a in $(/bin/busybox --list); do
        [[ -e $r/usr/bin/$a ]] || ln -s busybox "$r/usr/bin/$a"
    done
}

# add_libs ROOT FILE...: copy the shared libraries FILE... load (ldd's closure:
# every library and the loader), dereferenced, to the same path in ROOT.
add_libs() {
    local r=$1 lib
    shift
    while IFS= read -r lib; do
        [[ -e $r$lib ]] && continue
        mkdir -p "$(dirname "$r$lib")"
        cp -L "$lib" "$r$lib"
    done < <(lib_paths "$@")
}

# add_bin ROOT FILE DEST: a binary (without its debug sections: bazel's
# kvserver carries about 60 % debug info, and every byte costs time in the
# emulated VM's docker import) and its libraries.
add_bin() {
    need "$2"
    install -m 0755 "$2" "$1$3"
    if command -v strip >/dev/null; then strip --strip-debug "$1$3" 2>/dev/null || true; fi
    add_libs "$1" "$2"
}

# add_verbs ROOT: what libibverbs dlopens: the providers, their drivers
# files, and libgcc_s (glibc loads it for thread cancellation).
add_verbs() {
    local r=$1 p
    local dir=/usr/lib/x86_64-linux-gnu/libibverbs
    need "$dir" /etc/libibverbs.d
    mkdir -p "$r$dir" "$r/etc/libibverbs.d"
    cp /etc/libibverbs.d/*.driver "$r/etc/libibverbs.d/"
    for p in "$dir"/*.so; do
        cp -L "$p" "$r$p"
        add_libs "$r" "$p"
    done
    add_libgcc "$r"
}
add_libgcc() {
    local f=/lib/x86_64-linux-gnu/libgcc_s.so.1
    need "$f"
    [[ -e $1$f ]] || cp -L "$f" "$1$f"
}

# inputs_key FILE...: sha256 over what goes into an image: this script, the
# contents of its programs FILE..., and the path, size and mtime of every
# library they load (ldd), of the verbs providers and of busybox.  Cheap
# enough to run on every `up`: an image is assembled only when its key changed.
inputs_key() {
    {
        sha256sum "${BASH_SOURCE[0]}" "$@"
        {
            lib_paths "$@"
            ls -d /bin/busybox /etc/libibverbs.d/* /usr/lib/x86_64-linux-gnu/libibverbs/* 2>/dev/null
        } | sort -u | xargs -r stat -L -c '%n %s %Y'
    } | sha256sum | cut -c1-64
}
lib_paths() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u; }

# up_to_date NAME KEY: the image exists with this key (and --force not given).
up_to_date() {
    local have
    if [[ -n $SAVE ]]; then
        have=$(cat "$SAVE/$1.key" 2>/dev/null || true)
        if ((!FORCE)) && [[ $have == "$2" && -s $SAVE/$1.tar ]]; then
            echo "build-images: $1 up to date ($(($(stat -c %s "$SAVE/$1.tar") / 1048576)) MiB tar)"
            return 0
        fi
        return 1
    fi
    have=$(docker image inspect -f '{{index .Config.Labels "kvstore.inputs"}}' "$1:latest" 2>/dev/null || true)
    if ((!FORCE)) && [[ $have == "$2" ]]; then
        echo "build-images: $1 up to date ($(image_size "$1"))"
        return 0
    fi
    return 1
}

# import ROOT NAME KEY CHANGE...: docker import ROOT as NAME:latest, labelled
# with KEY; the image it replaces is removed.
import() {
    local r=$1 name=$2 key=$3 old
    shift 3
    old=$(docker image inspect -f '{{.Id}}' "$name:latest" 2>/dev/null || true)
    local changes=(-c "LABEL kvstore.inputs=$key" -c 'ENV PATH=/usr/local/bin:/usr/bin')
    local c
    for c; do changes+=(-c "$c"); done
    if [[ -n $SAVE ]]; then
        rm -f "$SAVE/$name.same"
        tar -C "$r" --numeric-owner --owner=0 --group=0 -cf "$SAVE/$name.tar.new" . &&
            printf '%s\n' "${changes[@]}" | grep -vx -- -c >"$SAVE/$name.changes" &&
            mv -f "$SAVE/$name.tar.new" "$SAVE/$name.tar" && echo "$key" >"$SAVE/$name.key" ||
            die "writing $SAVE/$name.tar failed"
        echo "build-images: $name saved ($(($(stat -c %s "$SAVE/$name.tar") / 1048576)) MiB tar)"
        return 0
    fi
    tar -C "$r" --numeric-owner --owner=0 --group=0 -c . |
        docker import "${changes[@]}" - "$name:latest" >/dev/null ||
        die "docker import of $name failed"
    echo "build-images: $name built ($(image_size "$name"))"
    # the image it replaces, unless a container still uses it
    [[ -z $old ]] || docker rmi "$old" >/dev/null 2>&1 || true
}
image_size() {
    local bytes
    bytes=$(docker image inspect -f '{{.Size}}' "$1:latest")
    echo "$((bytes / 1048576)) MiB"
}

# build_server [combined]: with "combined" (--save of both server and
# client) the server image also carries the client's programs, and
# kvstore-client is written as a tag of it (DIR/kvstore-client.same): one
# tar and one import fewer in the VM.  The compose file gives the client its
# own entrypoint, so the server image's does not matter there.
build_server() {
    local r=$WORK/server key progs extra=()
    # redis-cli: the RESP health check speaks TLS, which busybox nc cannot
    need "$BIN/server/kvserver" "$BIN/client/kvctl/kvctl" /usr/bin/redis-cli
    progs=("$BIN/server/kvserver" "$BIN/client/kvctl/kvctl" /usr/bin/redis-cli)
    if [[ ${1:-} == combined && -x $BIN/tests/cluster/chaos_load ]]; then
        extra=("$BIN/tests/cluster/chaos_load")
    fi
    key=$(inputs_key "${progs[@]}" "${extra[@]}")
    up_to_date kvstore-server "$key" && return
    new_root "$r"
    mkdir -p "$r/usr/local/bin"
    add_bin "$r" "$BIN/server/kvserver" /usr/local/bin/kvserver
    add_bin "$r" "$BIN/client/kvctl/kvctl" /usr/local/bin/kvctl
    add_bin "$r" /usr/bin/redis-cli /usr/bin/redis-cli
    ((${#extra[@]} == 0)) || add_bin "$r" "${extra[0]}" /usr/local/bin/chaos_load
    add_verbs "$r"
    import "$r" kvstore-server "$key" 'ENTRYPOINT ["/usr/local/bin/kvserver"]' 'WORKDIR /data'
}
# same_as NAME OTHER (--save only): NAME is loaded as a tag of OTHER.
same_as() {
    rm -f "$SAVE/$1.tar" "$SAVE/$1.key" "$SAVE/$1.changes"
    echo "$2" >"$SAVE/$1.same"
    echo "build-images: $1 saved as a tag of $2"
}
build_client() {
    local r=$WORK/client key extra=()
    need "$BIN/client/kvctl/kvctl" /usr/bin/redis-cli
    # the chaos load of deploy/compose/chaos.sh, when it has been built
    [[ -x $BIN/tests/cluster/chaos_load ]] && extra=("$BIN/tests/cluster/chaos_load")
    key=$(inputs_key "$BIN/client/kvctl/kvctl" /usr/bin/redis-cli "${extra[@]}")
    up_to_date kvstore-client "$key" && return
    new_root "$r"
    mkdir -p "$r/usr/local/bin"
    add_bin "$r" "$BIN/client/kvctl/kvctl" /usr/local/bin/kvctl
    add_bin "$r" /usr/bin/redis-cli /usr/bin/redis-cli
    ((${#extra[@]} == 0)) || add_bin "$r" "${extra[0]}" /usr/local/bin/chaos_load
    add_verbs "$r" # kvctl --transport=auto uses RDMA when the container has a device
    import "$r" kvstore-client "$key" 'CMD ["/bin/sh"]' 'WORKDIR /data'
}
build_etcd() {
    local r=$WORK/etcd key
    # etcdctl: etcd-init sets up etcd's users and roles with it
    need /usr/bin/etcd /usr/bin/etcdctl
    key=$(inputs_key /usr/bin/etcd /usr/bin/etcdctl)
    up_to_date kvstore-etcd "$key" && return
    new_root "$r"
    add_bin "$r" /usr/bin/etcd /usr/bin/etcd
    add_bin "$r" /usr/bin/etcdctl /usr/bin/etcdctl
    add_libgcc "$r"
    import "$r" kvstore-etcd "$key" 'ENTRYPOINT ["/usr/bin/etcd"]' 'WORKDIR /data'
}
build_prometheus() {
    local r=$WORK/prometheus key
    need /usr/bin/prometheus
    key=$(inputs_key /usr/bin/prometheus)
    up_to_date kvstore-prometheus "$key" && return
    new_root "$r"
    add_bin "$r" /usr/bin/prometheus /usr/bin/prometheus
    add_libgcc "$r"
    import "$r" kvstore-prometheus "$key" 'ENTRYPOINT ["/usr/bin/prometheus"]' 'WORKDIR /data'
}

# load_saved NAME: docker import of $LOAD/NAME.tar, unless the image has its key.
load_saved() {
    local name=$1 key line changes=()
    if [[ -s $LOAD/$name.same ]]; then
        docker tag "$(cat "$LOAD/$name.same"):latest" "$name:latest" ||
            die "docker tag $(cat "$LOAD/$name.same") $name failed"
        echo "build-images: $name tagged as $(cat "$LOAD/$name.same")"
        return 0
    fi
    [[ -s $LOAD/$name.tar && -s $LOAD/$name.key ]] || die "no $LOAD/$name.tar (build-images.sh --save $LOAD)"
    key=$(cat "$LOAD/$name.key")
    up_to_date "$name" "$key" && return
    while IFS= read -r line; do changes+=(-c "$line"); done <"$LOAD/$name.changes"
    docker import "${changes[@]}" "$LOAD/$name.tar" "$name:latest" >/dev/null ||
        die "docker import of $LOAD/$name.tar failed"
    echo "build-images: $name loaded from $LOAD ($(image_size "$name"))"
}
if [[ -n $LOAD ]]; then
    for img in "${IMAGES[@]}"; do load_saved "$img"; done
    exit 0
fi

COMBINED=0
[[ -n $SAVE && " ${IMAGES[*]} " == *" kvstore-server "* && " ${IMAGES[*]} " == *" kvstore-client "* ]] && COMBINED=1
for img in "${IMAGES[@]}"; do
    case $img in
    kvstore-server) if ((COMBINED)); then build_server combined; else build_server; fi ;;
    kvstore-client) if ((COMBINED)); then same_as kvstore-client kvstore-server; else build_client; fi ;;
    kvstore-etcd) build_etcd ;;
    kvstore-prometheus) build_prometheus ;;
    esac
done
