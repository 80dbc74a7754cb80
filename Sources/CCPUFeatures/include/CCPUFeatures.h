#ifndef MODELC_CCPUFEATURES_H
#define MODELC_CCPUFEATURES_H

/// The widest vector instructions modelc's own kernels use on this CPU:
/// 0 plain C, 2 AVX2 with FMA and F16C, 3 AVX-512 (F, BW, VL), 4 AVX-512
/// with VNNI (integer dot products). Capped by the environment variable
/// `MODELC_MAX_CPU_ISA` (`generic`, `avx2`, `avx512`, `avx512_vnni`), read
/// once, so the narrower paths can run on any machine.
int modelc_cpu_level(void);

#endif
