// Half-float (IEEE binary16) vectors: floats rounded to halves, and
// the two products attention needs over keys and values kept as fp16 (a
// decoder's cache in a state declared fp16, stored in its own 2 bytes). On
// AVX2 machines (level 2 and up have F16C) 8 halves are widened per
// instruction and accumulated with FMA in four independent sums; elsewhere
// plain loops over _Float16.
#include "CVectorMath.h"

#include "CCPUFeatures.h"

#include <stdint.h>

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>
#define HALF_AVX2 __attribute__((target("avx2,fma,f16c")))

HALF_AVX2 static void halves_from_floats_avx2(const float *values, long count, uint16_t *halves) {
    long i = 0;
    for (; i + 8 <= count; i += 8)
        _mm_storeu_si128((__m128i *)(halves + i), _mm256_cvtps_ph(_mm256_loadu_ps(values + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < count; i++) {
        _Float16 half = (_Float16)values[i];
        __builtin_memcpy(halves + i, &half, 2);
    }
}

HALF_AVX2 static inline __m256 load8(const uint16_t *halves) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)halves));
}

HALF_AVX2 static inline float sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Eight rows at a time, each in its own sum, the eight sums reduced together
// into one vector (a row's own horizontal sum cost as much as its products
// for a 64-wide head); the rows left one at a time.
HALF_AVX2 static void half_rows_dot_avx2(const uint16_t *a, long rows, long columns, long stride, const float *x, float scale, float *y) {
    long vector_columns = columns / 8 * 8, r = 0;
    __m256 factor = _mm256_set1_ps(scale);
    for (; r + 8 <= rows; r += 8) {
        const uint16_t *row = a + r * stride;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
        __m256 s4 = _mm256_setzero_ps(), s5 = _mm256_setzero_ps(), s6 = _mm256_setzero_ps(), s7 = _mm256_setzero_ps();
        for (long c = 0; c < vector_columns; c += 8) {
            __m256 xs = _mm256_loadu_ps(x + c);
            s0 = _mm256_fmadd_ps(load8(row + c), xs, s0);
            s1 = _mm256_fmadd_ps(load8(row + stride + c), xs, s1);
            s2 = _mm256_fmadd_ps(load8(row + 2 * stride + c), xs, s2);
            s3 = _mm256_fmadd_ps(load8(row + 3 * stride + c), xs, s3);
            s4 = _mm256_fmadd_ps(load8(row + 4 * stride + c), xs, s4);
            s5 = _mm256_fmadd_ps(load8(row + 5 * stride + c), xs, s5);
            s6 = _mm256_fmadd_ps(load8(row + 6 * stride + c), xs, s6);
            s7 = _mm256_fmadd_ps(load8(row + 7 * stride + c), xs, s7);
        }
        // Pairwise sums: each 128-bit lane ends with rows 0-3 (then 4-7) of its half of the columns.
        __m256 first = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
        __m256 second = _mm256_hadd_ps(_mm256_hadd_ps(s4, s5), _mm256_hadd_ps(s6, s7));
        __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(first, second, 0x20), _mm256_permute2f128_ps(first, second, 0x31));
        if (vector_columns < columns) {
            float tail[8];
            for (int i = 0; i < 8; i++) {
                float sum = 0;
                for (long c = vector_columns; c < columns; c++) {
                    _Float16 half;
                    __builtin_memcpy(&half, row + i * stride + c, 2);
                    sum += (float)half * x[c];
                }
                tail[i] = sum;
            }
            sums = _mm256_add_ps(sums, _mm256_loadu_ps(tail));
        }
        _mm256_storeu_ps(y + r, _mm256_mul_ps(sums, factor));
    }
    for (; r < rows; r++) {
        const uint16_t *row = a + r * stride;
        __m256 sum = _mm256_setzero_ps();
        long c = 0;
        for (; c < vector_columns; c += 8) sum = _mm256_fmadd_ps(load8(row + c), _mm256_loadu_ps(x + c), sum);
        float total = sum8(sum);
        for (; c < columns; c++) {
            _Float16 half;
            __builtin_memcpy(&half, row + c, 2);
            total += (float)half * x[c];
        }
        y[r] = scale * total;
    }
}

HALF_AVX2 static void half_rows_combine_avx2(const uint16_t *a, long rows, long columns, long stride, const float *w, float scale, float *y) {
    __m256 factor = _mm256_set1_ps(scale);
    long c = 0;
    // Columns in runs of 64 kept in eight sums over every row (enough sums in flight for two FMAs a cycle),
    // then runs of 8, then one at a time.
    for (; c + 64 <= columns; c += 64) {
        __m256 s[8];
        for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_ps();
        for (long r = 0; r < rows; r++) {
            const uint16_t *row = a + r * stride + c;
            __m256 weight = _mm256_set1_ps(w[r]);
            for (int i = 0; i < 8; i++) s[i] = _mm256_fmadd_ps(load8(row + 8 * i), weight, s[i]);
        }
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(y + c + 8 * i, _mm256_mul_ps(s[i], factor));
    }
    for (; c + 8 <= columns; c += 8) {
        __m256 sum = _mm256_setzero_ps();
        for (long r = 0; r < rows; r++) sum = _mm256_fmadd_ps(load8(a + r * stride + c), _mm256_set1_ps(w[r]), sum);
        _mm256_storeu_ps(y + c, _mm256_mul_ps(sum, factor));
    }
    for (; c < columns; c++) {
        float sum = 0;
        for (long r = 0; r < rows; r++) {
            _Float16 half;
            __builtin_memcpy(&half, a + r * stride + c, 2);
            sum += w[r] * (float)half;
        }
        y[c] = scale * sum;
    }
}
#endif

static inline float half_at(const uint16_t *halves, long index) {
    _Float16 half;
    __builtin_memcpy(&half, halves + index, 2);
    return (float)half;
}

void modelc_halves_from_floats(const float *values, long count, void *halves) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        halves_from_floats_avx2(values, count, halves);
        return;
    }
#endif
    uint16_t *target = halves;
    for (long i = 0; i < count; i++) {
        _Float16 half = (_Float16)values[i];
        __builtin_memcpy(target + i, &half, 2);
    }
}

void modelc_half_rows_dot(const void *a, long rows, long columns, long stride, const float *x, float scale, float *y) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        half_rows_dot_avx2(a, rows, columns, stride, x, scale, y);
        return;
    }
#endif
    const uint16_t *halves = a;
    for (long r = 0; r < rows; r++) {
        float sum = 0;
        for (long c = 0; c < columns; c++) sum += half_at(halves, r * stride + c) * x[c];
        y[r] = scale * sum;
    }
}

void modelc_half_rows_combine(const void *a, long rows, long columns, long stride, const float *w, float scale, float *y) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        half_rows_combine_avx2(a, rows, columns, stride, w, scale, y);
        return;
    }
#endif
    const uint16_t *halves = a;
    for (long c = 0; c < columns; c++) y[c] = 0;
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < columns; c++) y[c] += w[r] * half_at(halves, r * stride + c);
    for (long c = 0; c < columns; c++) y[c] *= scale;
}
