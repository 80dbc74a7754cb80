#!/usr/bin/env bash
# One line for a bench's heading: the CPU, the vector instruction sets it has, and the caps the
# environment puts on modelc's kernels and oneDNN's (docs/runtime.md, "CPU dispatch").
set -euo pipefail
model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2- | tr -d ' ')
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-) "
isa=""
for flag in avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 amx_bf16; do
    case "$flags" in *" $flag "*) isa="$isa $flag" ;; esac
done
has() { case "$flags" in *" $1 "*) return 0 ;; esac; return 1; }
# modelc's own dispatch (CCPUFeatures): AVX2 with FMA and F16C; AVX-512 F, BW and VL on top; then VNNI.
level=generic
if has avx2 && has fma && has f16c; then
    level=avx2
    if has avx512f && has avx512bw && has avx512vl; then level=avx512; fi
    if [ "$level" = avx512 ] && has avx512_vnni; then level=avx512_vnni; fi
fi
echo "CPU: $model (family $family), $(nproc) cores; ISA:${isa:- none of AVX2/AVX-512}"
echo "kernels: modelc ${MODELC_MAX_CPU_ISA:-$level}${MODELC_MAX_CPU_ISA:+ (capped by MODELC_MAX_CPU_ISA)}, oneDNN ${ONEDNN_MAX_CPU_ISA:-as detected}, OpenBLAS ${OPENBLAS_CORETYPE:-as detected}"
