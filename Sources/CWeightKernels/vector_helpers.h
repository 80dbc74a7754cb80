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

/// Loads a block of 32 floats at `v` into `parts` and gives its largest
/// magnitude in `biggest`; returns 0 when a value is NaN or infinite (x · 0
/// is NaN for them, which the maximum may pass over).
AVX2 static inline int block32_avx2(const float *v, __m256 parts[4], float *biggest) {
    const __m256 zero = _mm256_setzero_ps(), magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 most = zero, finite = zero;
    for (int i = 0; i < 4; i++) {
        parts[i] = _mm256_loadu_ps(v + 8 * i);
        most = _mm256_max_ps(most, _mm256_and_ps(parts[i], magnitude));
        finite = _mm256_add_ps(finite, _mm256_mul_ps(parts[i], zero));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(most), _mm256_extractf128_ps(most, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    *biggest = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    return _mm256_movemask_ps(_mm256_cmp_ps(finite, zero, _CMP_NEQ_UQ)) == 0;
}
#endif

#endif
