#!/usr/bin/env bash
# Cubins (sm_90a, -lineinfo, the build's flags) and ptxas logs of the decode kernels of a tree:
#   cubins.sh TREE OUTDIR [files...]   (default: the six decode_kernels_*.cu)
set -eu
TREE=$1; OUT=$2; shift 2
FILES=${*:-d64 d128 d256 fp8_d64 fp8_d128 fp8_d256}
mkdir -p "$OUT"
for f in $FILES; do
  /usr/local/cuda/bin/nvcc -DPKV_HAVE_CUDA=1 -I"$TREE" -O2 -DNDEBUG \
    -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -std=c++17 \
    -Xptxas -v -cubin -o "$OUT/$f.cubin" -x cu "$TREE/kernels/decode/decode_kernels_$f.cu" \
    2> "$OUT/$f.ptxas"
done
