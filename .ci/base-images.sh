#!/usr/bin/env bash
# Local base images for the CPU flavour of the Dockerfile, made from Debian's packages, for
# engines that cannot pull (CI, offline machines):
#   etserve-base/runtime-cpu:trixie  Debian 13 minbase + a headless JRE 25 (RUNTIME_BASE)
#   etserve-base/tools-cpu:trixie    the same + binutils and unzip (BUILD_BASE with
#                                      APP_JAR_SOURCE=prebuilt: unpacks the jar's native
#                                      libraries and runs the linkage check)
# Usage: .ci/base-images.sh [--force]
# An image is made only when missing or made by another recipe (label io.etserve.base-recipe).
# Root filesystem tarballs are cached under .cache/base-images (ETSERVE_BASE_IMAGE_CACHE) so a
# re-import needs no debootstrap. Needs root, a running engine and Debian's apt sources.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ETSERVE_BASE_IMAGE_CACHE:-$ROOT/.cache/base-images}"
SUITE="trixie"
RUNTIME_IMAGE="etserve-base/runtime-cpu:$SUITE"
TOOLS_IMAGE="etserve-base/tools-cpu:$SUITE"
RUNTIME_PACKAGES=(openjdk-25-jre-headless)
TOOLS_PACKAGES=(binutils unzip)
FORCE=false
[[ "${1:-}" == "--force" ]] && FORCE=true

log() { printf '[base-images] %s\n' "$*" >&2; }

# Any change to what goes into the images makes a new recipe id, so stale images are remade.
RECIPE="$( { echo "$SUITE ${RUNTIME_PACKAGES[*]} | ${TOOLS_PACKAGES[*]}"; sed -n '/^make_rootfs()/,/^}/p' "${BASH_SOURCE[0]}"; } \
  | sha256sum | cut -c1-16)"
RUNTIME_TAR="$CACHE/runtime-cpu-$SUITE-$RECIPE.tar"
TOOLS_TAR="$CACHE/tools-cpu-$SUITE-$RECIPE.tar"

image_current() {
  [[ "$FORCE" == false ]] || return 1
  local label
  label="$(docker image inspect --format '{{index .Config.Labels "io.etserve.base-recipe"}}' "$1" 2>/dev/null)" || return 1
  [[ "$label" == "$RECIPE" ]]
}

# The Debian mirror this machine's apt already uses (no host name is kept in this repo); the
# images' suite may differ from the host's, the archive is the same. $1: "debian" or "security".
debian_mirror() {
  apt-get indextargets --format '$(REPO_URI) $(SUITE) $(TARGET_OF)' 2>/dev/null \
    | awk -v want="$1" '$3 == "deb" && (want == "security") == ($2 ~ /-security$/) && $2 !~ /-updates$/ { print $1; exit }'
}

timed() {
  local what="$1"; shift
  local t0=$SECONDS
  "$@"
  log "$what: $((SECONDS - t0))s"
}

# apt inside the rootfs; its chatter goes to a log that is shown only when it fails.
chroot_apt() {
  local rootfs="$1"; shift
  if ! chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get -y -q \
      -o Acquire::Check-Valid-Until=false -o Acquire::Check-Date=false "$@" >>"$CACHE/apt.log" 2>&1; then
    log "apt-get $* failed in the rootfs; last lines of $CACHE/apt.log:"
    tail -n 30 "$CACHE/apt.log" >&2
    return 1
  fi
}

slim_and_pack() {
  local rootfs="$1" tarball="$2"
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/var/log/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/tmp/*
  # Package lists are needed again for the tools layer; drop them only from the tarball.
  tar --numeric-owner --exclude=./var/lib/apt/lists --exclude=./proc/* --exclude=./sys/* \
    --exclude=./dev/* -C "$rootfs" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
}

run_debootstrap() {
  if ! debootstrap --variant=minbase --arch=amd64 "$SUITE" "$1" "$2" >"$CACHE/debootstrap.log" 2>&1; then
    log "debootstrap failed; last lines of $CACHE/debootstrap.log:"
    tail -n 30 "$CACHE/debootstrap.log" >&2
    return 1
  fi
}

make_rootfs() {
  local rootfs="$CACHE/rootfs-$SUITE"
  local mirror security; mirror="$(debian_mirror debian)"; security="$(debian_mirror security)"
  [[ -n "$mirror" ]] || { log "no Debian apt source on this machine"; exit 1; }
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  # A run killed midway may have left the rootfs's /proc mounted: never rm -rf through it.
  umount "$rootfs/proc" 2>/dev/null || true
  rm -rf "$rootfs"
  mkdir -p "$CACHE"
  timed "debootstrap --variant=minbase $SUITE" run_debootstrap "$rootfs" "$mirror"
  # The suite, its updates and its security updates, from the host's mirrors.
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" "$SUITE" "$SUITE"
    [[ -z "$security" ]] || printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$security" "$SUITE"
  } > "$rootfs/etc/apt/sources.list.d/debian.sources"
  rm -f "$rootfs/etc/apt/sources.list"
  mount -t proc proc "$rootfs/proc"
  trap 'umount "$rootfs/proc" 2>/dev/null || true' EXIT
  : >"$CACHE/apt.log"
  timed "apt-get update (rootfs)" chroot_apt "$rootfs" update
  timed "install ${RUNTIME_PACKAGES[*]}" chroot_apt "$rootfs" install --no-install-recommends "${RUNTIME_PACKAGES[@]}"
  chroot "$rootfs" java -version >/dev/null 2>&1 || { log "java does not run in the rootfs"; exit 1; }
  timed "pack runtime rootfs" slim_and_pack "$rootfs" "$RUNTIME_TAR"
  timed "install ${TOOLS_PACKAGES[*]}" chroot_apt "$rootfs" install --no-install-recommends "${TOOLS_PACKAGES[@]}"
  timed "pack tools rootfs" slim_and_pack "$rootfs" "$TOOLS_TAR"
  umount "$rootfs/proc"
  trap - EXIT
  rm -rf "$rootfs"
}

import_image() {
  local tarball="$1" image="$2"
  timed "docker import $image" docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change "LABEL io.etserve.base-recipe=$RECIPE" \
    --change 'CMD ["/bin/bash"]' \
    "$tarball" "$image" >/dev/null
}

main() {
  docker info >/dev/null 2>&1 || { log "no container engine answers (run .ci/container-engine.sh start)"; exit 1; }
  if image_current "$RUNTIME_IMAGE" && image_current "$TOOLS_IMAGE"; then
    log "$RUNTIME_IMAGE and $TOOLS_IMAGE are current (recipe $RECIPE)"
    return
  fi
  if [[ "$FORCE" == true || ! -f "$RUNTIME_TAR" || ! -f "$TOOLS_TAR" ]]; then
    make_rootfs
  fi
  import_image "$RUNTIME_TAR" "$RUNTIME_IMAGE"
  import_image "$TOOLS_TAR" "$TOOLS_IMAGE"
  # Tarballs of older recipes are dead weight.
  find "$CACHE" -maxdepth 1 -name '*-cpu-*.tar' ! -name "*-$RECIPE.tar" -delete
  log "ready: $RUNTIME_IMAGE, $TOOLS_IMAGE (recipe $RECIPE)"
}

main
