#!/usr/bin/env bash
# Builds GPU binaries for the H200 (sm_90a only, so a kernel change rebuilds in ~30 s on the
# 2-core box) and packs them for one `device` call: .device/NAME.tar.xz, to be named in the
# call's carry list and unpacked there by common.sh's `unpack NAME`.
#
#   bench/device/bundle.sh NAME [options] TARGET...
#     TARGET            a CMake target with a binary in bin/ (pkv-bench, gemv_device_test, ...)
#     --base REV        also build pkv-bench at git revision REV (a worktree in .device/base-REV,
#                       its own build folder; ccache makes repeats cheap) and bundle it as
#                       bin/pkv-bench-base: the same-call baseline every comparison needs
#     --base-target TARGET  also build TARGET (a test binary, say) at REV in the base worktree and
#                       bundle it as bin/TARGET-base, so a call can run both trees' device tests;
#                       repeatable, needs --base
#     --variant NAME:CMAKE_ARGS  also build this tree's pkv-bench with extra CMake arguments
#                       (space-separated, e.g. "nofinish:-DPKV_GEMV_NO_FINISH=ON") in its own
#                       folder BUILD-NAME, bundled as bin/pkv-bench-NAME; repeatable
#     --add FILE[:NAME] copy a binary built elsewhere into bin/ (as NAME), e.g. a variant built
#                       from the same tree with different macro defaults; repeatable
#     --note TEXT       a line for REVISION (what the bundle is, uncommitted changes, variants)
#     --build DIR       the sm_90a build folder (default build-sm90)
#
# REVISION records the tree's commit, whether it had uncommitted changes (and the diff's hash),
# the base revision and the note; a script reads it with `cat $B/REVISION`. Binaries are
# stripped; libraries the GPU machine lacks come along through shared/tools/device-bundle.
# Lessons this encodes (bench/NOTES.md, device notes): the call's limit is 64 MiB compressed, so
# strip and xz; the GPU machine keeps nothing between calls, so every binary a script runs,
# the baseline included, travels in the bundle.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
name=${1:?usage: bench/device/bundle.sh NAME [--base REV [--base-target T]...] [--variant NAME:ARGS] [--add FILE[:NAME]] [--note TEXT] TARGET...}
shift
build=build-sm90 base="" note="" adds=() variants=() targets=() base_targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --base-target) base_targets+=("$2"); shift 2 ;;
    --add) adds+=("$2"); shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    --note) note=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -*) echo "bundle.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || { echo "bundle.sh: name at least one target" >&2; exit 2; }
bundler=${PKV_DEVICE_BUNDLE:-$root/../shared/tools/device-bundle}
# ccache keyed on paths relative to the repository, so the base worktree and variant folders
# reuse each other's objects (debug info then names other folders: bench binaries only).
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
[ -x "$bundler" ] || { echo "bundle.sh: $bundler not found (set PKV_DEVICE_BUNDLE)" >&2; exit 2; }

configure() {  # configure SRC BUILD [ARG...]: an sm_90a-only RelWithDebInfo CUDA build (+ ARGs)
  local src=$1 dir=$2
  shift 2
  [ -f "$dir/build.ninja" ] && [ $# -eq 0 ] && return 0
  mkdir -p "$dir"
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPKV_ENABLE_CUDA=ON \
    "-DPKV_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" "$@" > "$dir/configure.log" 2>&1 ||
    { echo "bundle.sh: cmake failed, see $dir/configure.log" >&2; exit 1; }
}

echo "bundle.sh: building ${targets[*]} in $build"
configure "$root" "$build"
ninja -C "$build" -j2 "${targets[@]}" > "$build/bundle-$name.log" 2>&1 ||
  { tail -20 "$build/bundle-$name.log" >&2; exit 1; }

out=.device/$name
rm -rf "$out" ".device/$name.tar.xz"
mkdir -p .device
bins=()
for t in "${targets[@]}"; do bins+=("$build/bin/$t"); done
"$bundler" "$out" "${bins[@]}" > /dev/null

if [ -n "$base" ]; then
  wt=.device/base-$(git rev-parse --short "$base")
  if [ ! -d "$wt" ]; then git worktree add -f --detach "$wt" "$base" > /dev/null; fi
  echo "bundle.sh: building pkv-bench at $base in $wt"
  configure "$root/$wt" "$root/$wt/$build"
  ninja -C "$wt/$build" -j2 pkv-bench "${base_targets[@]}" > "$wt/$build/bundle.log" 2>&1 ||
    { tail -20 "$wt/$build/bundle.log" >&2; exit 1; }
  cp "$wt/$build/bin/pkv-bench" "$out/bin/pkv-bench-base"
  for t in "${base_targets[@]}"; do cp "$wt/$build/bin/$t" "$out/bin/$t-base"; done
elif [ ${#base_targets[@]} -gt 0 ]; then
  echo "bundle.sh: --base-target needs --base" >&2; exit 2
fi
for v in "${variants[@]}"; do
  vname=${v%%:*} vargs=${v#*:}
  echo "bundle.sh: building pkv-bench-$vname ($vargs) in $build-$vname"
  # shellcheck disable=SC2086  # the arguments are meant to split
  configure "$root" "$build-$vname" $vargs
  ninja -C "$build-$vname" -j2 pkv-bench > "$build-$vname/bundle.log" 2>&1 ||
    { tail -20 "$build-$vname/bundle.log" >&2; exit 1; }
  cp "$build-$vname/bin/pkv-bench" "$out/bin/pkv-bench-$vname"
done
for a in "${adds[@]}"; do
  src=${a%%:*} dst=${a#*:}
  [ "$dst" = "$a" ] && dst=$(basename "$src")
  cp "$src" "$out/bin/$dst"
done

{
  rev=$(git rev-parse --short HEAD)
  if git diff --quiet HEAD; then
    echo "$rev"
  else
    echo "$rev + uncommitted changes (diff $(git diff HEAD | sha1sum | cut -c1-10))"
  fi
  [ -n "$base" ] && echo "base (pkv-bench-base): $(git rev-parse --short "$base")"
  [ ${#base_targets[@]} -gt 0 ] && echo "at the base too (NAME-base): ${base_targets[*]}"
  for v in "${variants[@]}"; do echo "pkv-bench-${v%%:*}: this tree with ${v#*:}"; done
  [ -n "$note" ] && echo "$note"
} > "$out/REVISION"
strip --strip-unneeded "$out"/bin/* 2> /dev/null || true
tar -C .device -cJf ".device/$name.tar.xz" "$name"
size=$(stat -c %s ".device/$name.tar.xz")
echo "bundle.sh: .device/$name.tar.xz, $((size / 1048576)) MiB; bin: $(ls "$out/bin" | tr '\n' ' ')"
[ "$size" -lt $((64 * 1048576)) ] || echo "bundle.sh: over the call's 64 MiB limit" >&2
echo "carry: [\".device/$name.tar.xz\"]"
