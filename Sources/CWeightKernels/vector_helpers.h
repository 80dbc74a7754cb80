#ifndef MODELC_WEIGHT_KERNELS_VECTOR_HELPERS_H
#define MODELC_WEIGHT_KERNELS_VECTOR_HELPERS_H

// What the weight kernels' files share: the target attributes of their vector
// paths (each function compiled for the instructions it uses, chosen at run
// time by `modelc_cpu_level`) and a horizontal sum.
#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define AVX512_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/// The sum of the 8 floats of `v`.
AVX2 static inline float sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

#endif
