#!/bin/sh
# cuda-deps.sh DIR: puts the CUDA 11.8 build dependencies from Debian
# bookworm's non-free section under DIR, installing nothing system-wide:
#   DIR/usr/include                 cuda.h and the CUDA C headers (nvidia-cuda-dev)
#   DIR/usr/lib/x86_64-linux-gnu/stubs/libcuda.so   the driver stub to link against
#   DIR/usr/lib/nvidia-cuda-toolkit/bin/nvcc, cicc  (nvidia-cuda-toolkit)
#   DIR/usr/bin/ptxas
# apt runs with a private sources list, lists and cache under DIR/apt, so
# the machine's apt configuration is untouched. Run again, it does nothing.
set -eu
dir=${1:?usage: cuda-deps.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
nvcc="$dir/usr/lib/nvidia-cuda-toolkit/bin/nvcc"
if [ -x "$nvcc" ] && [ -f "$dir/usr/include/cuda.h" ] && [ -f "$dir/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" ]; then
	exit 0
fi
apt="$dir/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
cat >"$apt/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main contrib non-free
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main contrib non-free
SRC
opts="-o Dir::Etc::SourceList=$apt/sources.list -o Dir::Etc::SourceParts=/nonexistent
 -o Dir::State::Lists=$apt/lists -o Dir::Cache=$apt/cache -o Debug::NoLocking=1"
echo "cuda-deps: apt-get update (private lists in $apt)"
# shellcheck disable=SC2086
apt-get $opts -qq update
cd "$apt/debs"
echo "cuda-deps: downloading nvidia-cuda-toolkit and nvidia-cuda-dev (about 860 MB, once)"
# shellcheck disable=SC2086
apt-get $opts -qq download nvidia-cuda-toolkit nvidia-cuda-dev
# Only what a PTX build and a link against the stub need (nvidia-cuda-dev
# unpacks to 2.8 GB, mostly libraries we never link).
dpkg --fsys-tarfile nvidia-cuda-toolkit_*.deb | tar -x -C "$dir" ./usr/lib/nvidia-cuda-toolkit ./usr/bin/ptxas
dpkg --fsys-tarfile nvidia-cuda-dev_*.deb | tar -x -C "$dir" ./usr/include ./usr/lib/x86_64-linux-gnu/stubs
# Debian's nvcc.profile is a link to /etc/nvcc.profile with absolute paths;
# ours is relative to nvcc itself.
bin="$dir/usr/lib/nvidia-cuda-toolkit/bin"
rm -f "$bin/nvcc.profile"
cat >"$bin/nvcc.profile" <<'PROFILE'
NVVMIR_LIBRARY_DIR = $(_HERE_)/../libdevice
PATH += $(_HERE_):
INCLUDES += "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu/stubs"
PROFILE
rm -f nvidia-cuda-dev_*.deb nvidia-cuda-toolkit_*.deb
"$nvcc" --version | tail -1
