// Elementwise kernels written as plain loops with no calls and no branches,
// so that the compiler vectorizes them: oneDNN 2.6's AVX2 gelu_tanh, and
// the same function written with Swift's SIMD types, took 0.5-0.7 ms for
// 64 x 3,072 floats on one thread.
#include "CVectorMath.h"

#include "CCPUFeatures.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

// Each loop below is compiled once per instruction set, inside the wrapper
// whose target attribute names it: it must be inlined there, or the compiler
// may keep one out-of-line copy for the baseline x86-64 and call it from the
// AVX2 wrapper too (the softmax was: scalar, a third of a decoder step's attention).
#define KERNEL_LOOP static inline __attribute__((always_inline))

KERNEL_LOOP int32_t float_bits(float value) {
    int32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

KERNEL_LOOP float bits_float(int32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

// e^x within about 2 ulp: x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its
// Taylor series to r^7 (the next term is below 1.4e-9 of the result), 2^n
// made in the exponent bits. Below -87.3 the result stays at e^-87.3 (a
// normal float), above 88.3 it is +inf; NaN gives NaN.
KERNEL_LOOP float exp_polynomial(float x) {
    float clamped = x > 88.3f ? 88.3f : (x < -87.3f ? -87.3f : x);
    // Round x / ln 2 to the nearest integer by adding and subtracting 1.5 * 2^23, whose bits then hold it.
    const float shifter = 12582912.0f;
    float shifted = clamped * 1.44269504f + shifter;
    float n = shifted - shifter;
    // ln 2 in two parts, so that r keeps its precision.
    float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
    float series = (1.0f / 5040) * r + (1.0f / 720);
    series = series * r + (1.0f / 120);
    series = series * r + (1.0f / 24);
    series = series * r + (1.0f / 6);
    series = series * r + 0.5f;
    series = series * r + 1.0f;
    series = series * r + 1.0f;
    float result = series * bits_float((float_bits(shifted) - 0x4B400000 + 127) << 23);
    result = x > 88.3f ? INFINITY : result;
    return x != x ? x : result;
}

KERNEL_LOOP void gelu_tanh_loop(float *values, long count) {
    const float scale = -2.0f * 0.7978845608f;  // -2 sqrt(2 / pi)
    for (long index = 0; index < count; index++) {
        float x = values[index];
        values[index] = x / (1.0f + exp_polynomial(scale * (x + 0.044715f * x * x * x)));
    }
}

// x / (1 + e^-x): SiLU (swish), a decoder MLP's gate.
KERNEL_LOOP void silu_loop(float *values, long count) {
    for (long index = 0; index < count; index++) {
        float x = values[index];
        values[index] = x / (1.0f + exp_polynomial(-x));
    }
}

#if defined(__x86_64__) && defined(__clang__)
__attribute__((target("avx2,fma"))) static void gelu_tanh_avx2(float *values, long count) {
    gelu_tanh_loop(values, count);
}

__attribute__((target("avx2,fma"))) static void silu_avx2(float *values, long count) {
    silu_loop(values, count);
}
#endif

static void silu_generic(float *values, long count) {
    silu_loop(values, count);
}

void modelc_silu(float *values, long count) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        silu_avx2(values, count);
        return;
    }
#endif
    silu_generic(values, count);
}

static void gelu_tanh_generic(float *values, long count) {
    gelu_tanh_loop(values, count);
}

void modelc_gelu_tanh(float *values, long count) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        gelu_tanh_avx2(values, count);
        return;
    }
#endif
    gelu_tanh_generic(values, count);
}

// Eight lanes of partial results, so that the compiler keeps them in one vector without reassociating.
KERNEL_LOOP void softmax_rows_loop(float *values, long rows, long columns) {
    for (long row = 0; row < rows; row++) {
        float *line = values + row * columns;
        float largest[8];
        for (int lane = 0; lane < 8; lane++) largest[lane] = -INFINITY;
        long index = 0;
        for (; index + 8 <= columns; index += 8) {
            for (int lane = 0; lane < 8; lane++) {
                float x = line[index + lane];
                // NaN wins, as it does in the row's largest below.
                largest[lane] = (x > largest[lane] || x != x) ? x : largest[lane];
            }
        }
        float top = -INFINITY;
        for (int lane = 0; lane < 8; lane++) top = (largest[lane] > top || largest[lane] != largest[lane]) ? largest[lane] : top;
        for (; index < columns; index++) top = (line[index] > top || line[index] != line[index]) ? line[index] : top;
        float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        index = 0;
        for (; index + 8 <= columns; index += 8) {
            for (int lane = 0; lane < 8; lane++) {
                float d = line[index + lane] - top;
                // A masked column (-inf) weighs exactly nothing (the polynomial stops at e^-87.3).
                float e = d < -87.3f ? 0.0f : exp_polynomial(d);
                line[index + lane] = e;
                sums[lane] += e;
            }
        }
        float sum = 0;
        for (; index < columns; index++) {
            float d = line[index] - top;
            float e = d < -87.3f ? 0.0f : exp_polynomial(d);
            line[index] = e;
            sum += e;
        }
        for (int lane = 0; lane < 8; lane++) sum += sums[lane];
        float inverse = 1.0f / sum;
        for (index = 0; index < columns; index++) line[index] *= inverse;
    }
}

#if defined(__x86_64__) && defined(__clang__)
#include <immintrin.h>
#define AVX2_FMA __attribute__((target("avx2,fma")))

// exp_polynomial on eight lanes, step for step.
AVX2_FMA static inline __m256 exp_polynomial8(__m256 x) {
    __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 shifter = _mm256_set1_ps(12582912.0f);
    __m256 shifted = _mm256_fmadd_ps(clamped, _mm256_set1_ps(1.44269504f), shifter);
    __m256 n = _mm256_sub_ps(shifted, shifter);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), clamped));
    __m256 series = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 5040), r, _mm256_set1_ps(1.0f / 720));
    series = _mm256_fmadd_ps(series, r, _mm256_set1_ps(1.0f / 120));
    series = _mm256_fmadd_ps(series, r, _mm256_set1_ps(1.0f / 24));
    series = _mm256_fmadd_ps(series, r, _mm256_set1_ps(1.0f / 6));
    series = _mm256_fmadd_ps(series, r, _mm256_set1_ps(0.5f));
    series = _mm256_fmadd_ps(series, r, _mm256_set1_ps(1.0f));
    series = _mm256_fmadd_ps(series, r, _mm256_set1_ps(1.0f));
    __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x4B400000)),
                                                          _mm256_set1_epi32(127)), 23);
    __m256 result = _mm256_mul_ps(series, _mm256_castsi256_ps(exponent));
    result = _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(88.3f), _CMP_GT_OQ));
    return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// The loop above in eight lanes written out: compiled for AVX2, the compiler
// kept it scalar (one e^x at a time), a third of a decoder step's attention.
AVX2_FMA static void softmax_rows_avx2(float *values, long rows, long columns) {
    long vector_columns = columns / 8 * 8;
    for (long row = 0; row < rows; row++) {
        float *line = values + row * columns;
        __m256 largest = _mm256_set1_ps(-INFINITY), unordered = _mm256_setzero_ps();
        for (long index = 0; index < vector_columns; index += 8) {
            __m256 x = _mm256_loadu_ps(line + index);
            largest = _mm256_max_ps(largest, x);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, largest);
        float top = -INFINITY;
        for (int lane = 0; lane < 8; lane++) top = lanes[lane] > top ? lanes[lane] : top;
        // NaN wins, as it does in the loop above.
        if (_mm256_movemask_ps(unordered)) top = NAN;
        for (long index = vector_columns; index < columns; index++) top = (line[index] > top || line[index] != line[index]) ? line[index] : top;
        __m256 sums = _mm256_setzero_ps(), topv = _mm256_set1_ps(top), floor = _mm256_set1_ps(-87.3f);
        for (long index = 0; index < vector_columns; index += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(line + index), topv);
            // A masked column (-inf) weighs exactly nothing.
            __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(d, floor, _CMP_LT_OQ), exp_polynomial8(d));
            _mm256_storeu_ps(line + index, e);
            sums = _mm256_add_ps(sums, e);
        }
        float sum = 0;
        for (long index = vector_columns; index < columns; index++) {
            float d = line[index] - top;
            float e = d < -87.3f ? 0.0f : exp_polynomial(d);
            line[index] = e;
            sum += e;
        }
        _mm256_storeu_ps(lanes, sums);
        for (int lane = 0; lane < 8; lane++) sum += lanes[lane];
        __m256 inverse = _mm256_set1_ps(1.0f / sum);
        long index = 0;
        for (; index < vector_columns; index += 8) _mm256_storeu_ps(line + index, _mm256_mul_ps(_mm256_loadu_ps(line + index), inverse));
        for (; index < columns; index++) line[index] *= 1.0f / sum;
    }
}
#endif

static void softmax_rows_generic(float *values, long rows, long columns) {
    softmax_rows_loop(values, rows, columns);
}

void modelc_softmax_rows(float *values, long rows, long columns) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        softmax_rows_avx2(values, rows, columns);
        return;
    }
#endif
    softmax_rows_generic(values, rows, columns);
}
