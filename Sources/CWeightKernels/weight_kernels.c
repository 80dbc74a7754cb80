// Products and decoding over weights kept as the model file stores them
// (int4 / int8 codes with per-block scales, lookup tables, half floats):
// each block of codes is widened to floats in registers and multiplied
// there, so a one-token decoder step reads its weights at their stored size
// and no float copy of them is ever made.
#include "CWeightKernels.h"

#include "CCPUFeatures.h"
#include "quantized_inputs.h"
#include "vector_helpers.h"

#include <stdlib.h>
#include <string.h>

// MARK: Elements

static inline float half_to_float(uint16_t half) {
    uint32_t sign = (uint32_t)(half & 0x8000) << 16;
    uint32_t exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF, bits;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000 | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        // Subnormal: shift the mantissa up until its leading bit is the implicit one.
        int shift = 0;
        while ((mantissa & 0x400) == 0) {
            mantissa <<= 1;
            shift++;
        }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3FF) << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/// The scale of `block`: a float, a half float, or 1 when there are none.
static inline float scale_at(const modelc_packed_matrix *m, long block) {
    if (m->scale) return m->scale[block];
    return m->scale_halves ? half_to_float(m->scale_halves[block]) : 1;
}

/// Code `index` (row-major) of the matrix: at most two bytes are read.
static inline int code_at(const modelc_packed_matrix *m, long index) {
    long bit = index * m->bits;
    const uint8_t *p = m->codes + (bit >> 3);
    int shift = (int)(bit & 7);
    unsigned value = (unsigned)p[0] >> shift;
    if (8 - shift < m->bits) value |= (unsigned)p[1] << (8 - shift);
    value &= (1u << m->bits) - 1;
    if (m->is_signed && (value >> (m->bits - 1))) return (int)value - (1 << m->bits);
    return (int)value;
}

static inline long block_of(const modelc_packed_matrix *m, long row, long column) {
    return (row / m->block_rows) * (m->columns / m->block_columns) + column / m->block_columns;
}

/// Element (row, column) as a float, by the general rule.
static inline float element(const modelc_packed_matrix *m, long row, long column) {
    long index = row * m->columns + column;
    if (m->bits == 16) {
        uint16_t half;
        memcpy(&half, m->codes + index * 2, 2);
        return half_to_float(half);
    }
    int code = code_at(m, index);
    long block = block_of(m, row, column);
    float value;
    if (m->table) {
        value = m->table[block * m->entries + code];
    } else {
        float offset = m->offset ? m->offset[block] : 0, scale = scale_at(m, block);
        value = ((float)code - offset) * scale;
    }
    return m->round_to_half ? (float)(_Float16)value : value;
}

// MARK: Decoding

/// Plain C: `count` codes of 4 or 8 bits from a byte boundary, as floats.
static void widen_codes_generic(const uint8_t *bytes, int bits, int is_signed, long count, float *out) {
    if (bits == 8) {
        for (long i = 0; i < count; i++) out[i] = is_signed ? (float)(int8_t)bytes[i] : (float)bytes[i];
        return;
    }
    for (long i = 0; i < count; i++) {
        int code = (bytes[i >> 1] >> ((i & 1) * 4)) & 0xF;
        out[i] = (float)(is_signed && code >= 8 ? code - 16 : code);
    }
}

#if defined(__x86_64__) && defined(__clang__)
/// 16 codes of 4 bits from 8 bytes, in order, as bytes (sign-extended when signed).
AVX2 static inline __m128i nibbles16(const uint8_t *bytes, int is_signed) {
    __m128i packed = _mm_loadl_epi64((const __m128i *)bytes);
    __m128i mask = _mm_set1_epi8(0x0F);
    __m128i low = _mm_and_si128(packed, mask), high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
    __m128i codes = _mm_unpacklo_epi8(low, high);
    if (is_signed) codes = _mm_sub_epi8(_mm_xor_si128(codes, _mm_set1_epi8(8)), _mm_set1_epi8(8));
    return codes;
}

AVX2 static inline __m256 widen8(__m128i bytes, int is_signed) {
    return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes));
}

AVX2 static void widen_codes_avx2(const uint8_t *bytes, int bits, int is_signed, long count, float *out) {
    long i = 0;
    if (bits == 4) {
        for (; i + 16 <= count; i += 16) {
            __m128i codes = nibbles16(bytes + i / 2, is_signed);
            _mm256_storeu_ps(out + i, widen8(codes, is_signed));
            _mm256_storeu_ps(out + i + 8, widen8(_mm_srli_si128(codes, 8), is_signed));
        }
        widen_codes_generic(bytes + i / 2, bits, is_signed, count - i, out + i);
        return;
    }
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, widen8(_mm_loadl_epi64((const __m128i *)(bytes + i)), is_signed));
    widen_codes_generic(bytes + i, bits, is_signed, count - i, out + i);
}

AVX2 static void halves_avx2(const uint8_t *bytes, long count, float *out) {
    long i = 0;
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bytes + i * 2))));
    for (; i < count; i++) {
        uint16_t half;
        memcpy(&half, bytes + i * 2, 2);
        out[i] = half_to_float(half);
    }
}
#endif

#if defined(__x86_64__) && defined(__clang__)
AVX2 static void round_to_half_avx2(float *values, long count) {
    long i = 0;
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(values + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(values + i), 0)));
    for (; i < count; i++) values[i] = (float)(_Float16)values[i];
}
#endif

/// Each value rounded to the nearest half float.
static void round_to_half(float *values, long count) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        round_to_half_avx2(values, count);
        return;
    }
#endif
    for (long i = 0; i < count; i++) values[i] = (float)(_Float16)values[i];
}

void modelc_decode_halves(const void *halves, long count, float *out) {
#if defined(__x86_64__) && defined(__clang__)
    if (modelc_cpu_level() >= 2) {
        halves_avx2(halves, count, out);
        return;
    }
#endif
    const uint8_t *bytes = halves;
    for (long i = 0; i < count; i++) {
        uint16_t half;
        memcpy(&half, bytes + i * 2, 2);
        out[i] = half_to_float(half);
    }
}

/// Columns `first` ..< `first + count` of `row` as floats at `out`.
static void decode_segment(const modelc_packed_matrix *m, long row, long first, long count, float *out) {
    if (m->bits == 16) {
#if defined(__x86_64__) && defined(__clang__)
        if (modelc_cpu_level() >= 2) {
            halves_avx2(m->codes + (row * m->columns + first) * 2, count, out);
            return;
        }
#endif
        for (long i = 0; i < count; i++) out[i] = element(m, row, first + i);
        return;
    }
    int whole_bytes = (m->bits == 8 || m->bits == 4) && m->table == NULL;
    long column = first, end = first + count;
    while (column < end) {
        // A run of columns in one block: one scale, one offset.
        long run_end = (column / m->block_columns + 1) * m->block_columns;
        if (run_end > end) run_end = end;
        long index = row * m->columns + column, run = run_end - column;
        float *target = out + (column - first);
        if (whole_bytes && (index * m->bits) % 8 == 0) {
            const uint8_t *bytes = m->codes + index * m->bits / 8;
#if defined(__x86_64__) && defined(__clang__)
            if (modelc_cpu_level() >= 2) widen_codes_avx2(bytes, m->bits, m->is_signed, run, target);
            else
#endif
                widen_codes_generic(bytes, m->bits, m->is_signed, run, target);
            long block = block_of(m, row, column);
            float offset = m->offset ? m->offset[block] : 0, scale = scale_at(m, block);
            for (long i = 0; i < run; i++) target[i] = (target[i] - offset) * scale;
            if (m->round_to_half) round_to_half(target, run);
        } else {
            for (long i = 0; i < run; i++) target[i] = element(m, row, column + i);
        }
        column = run_end;
    }
}

void modelc_packed_decode_block(const modelc_packed_matrix *matrix, long first_row, long row_count, long first_column, long column_count,
                                float *out, long out_stride) {
    for (long r = 0; r < row_count; r++) decode_segment(matrix, first_row + r, first_column, column_count, out + r * out_stride);
}

// MARK: Vector products

/// Columns decoded at a time where no fused loop applies.
enum { segment_columns = 256 };

static float dot_row_decoded(const modelc_packed_matrix *m, const float *x, long row) {
    float buffer[segment_columns];
    double sum = 0;
    for (long first = 0; first < m->columns; first += segment_columns) {
        long count = m->columns - first < segment_columns ? m->columns - first : segment_columns;
        decode_segment(m, row, first, count, buffer);
        float part = 0;
        for (long i = 0; i < count; i++) part += x[first + i] * buffer[i];
        sum += part;
    }
    return (float)sum;
}

/// Whether the fused loops read this matrix: 4- or 8-bit codes without a
/// table, every block a whole number of 16-code groups starting on a byte, or halves.
static int fused_layout(const modelc_packed_matrix *m) {
    if (m->bits == 16) return 1;
    if (m->table || (m->bits != 4 && m->bits != 8)) return 0;
    return m->block_columns % 16 == 0 && m->columns % 16 == 0;
}

#if defined(__x86_64__) && defined(__clang__)
/// Codes made values, (q − offset) · scale, rounded to the nearest half float.
AVX2 static inline __m256 half8(__m256 codes, const modelc_packed_matrix *m, long block) {
    __m256 value = _mm256_sub_ps(codes, _mm256_set1_ps(m->offset ? m->offset[block] : 0));
    value = _mm256_mul_ps(value, _mm256_set1_ps(scale_at(m, block)));
    return _mm256_cvtph_ps(_mm256_cvtps_ph(value, 0));
}

AVX2 static void dot_rows_avx2(const modelc_packed_matrix *m, const float *x, float *y, long first_row, long row_count) {
    const long columns = m->columns, width = m->block_columns;
    for (long r = first_row; r < first_row + row_count; r++) {
        __m256 total = _mm256_setzero_ps();
        if (m->bits == 16) {
            const uint8_t *row = m->codes + r * columns * 2;
            __m256 second = _mm256_setzero_ps();
            long c = 0;
            for (; c + 16 <= columns; c += 16) {
                total = _mm256_fmadd_ps(_mm256_loadu_ps(x + c), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + c * 2))), total);
                second = _mm256_fmadd_ps(_mm256_loadu_ps(x + c + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + c * 2 + 16))), second);
            }
            float rest = 0;
            for (; c < columns; c++) rest += x[c] * element(m, r, c);
            y[r - first_row] = sum8(_mm256_add_ps(total, second)) + rest;
            continue;
        }
        const long scales = (r / m->block_rows) * (columns / width);
        for (long c = 0; c < columns; c += width) {
            __m256 product = _mm256_setzero_ps(), inputs = _mm256_setzero_ps();
            const long block = scales + c / width;
            if (m->bits == 4) {
                const uint8_t *bytes = m->codes + (r * columns + c) / 2;
                for (long j = 0; j < width; j += 16) {
                    __m128i codes = nibbles16(bytes + j / 2, m->is_signed);
                    __m256 x0 = _mm256_loadu_ps(x + c + j), x1 = _mm256_loadu_ps(x + c + j + 8);
                    __m256 q0 = widen8(codes, m->is_signed), q1 = widen8(_mm_srli_si128(codes, 8), m->is_signed);
                    if (m->round_to_half) {
                        q0 = half8(q0, m, block);
                        q1 = half8(q1, m, block);
                    }
                    product = _mm256_fmadd_ps(x0, q0, product);
                    product = _mm256_fmadd_ps(x1, q1, product);
                    if (m->offset) inputs = _mm256_add_ps(inputs, _mm256_add_ps(x0, x1));
                }
            } else {
                const uint8_t *bytes = m->codes + r * columns + c;
                for (long j = 0; j < width; j += 8) {
                    __m256 x0 = _mm256_loadu_ps(x + c + j);
                    __m256 q0 = widen8(_mm_loadl_epi64((const __m128i *)(bytes + j)), m->is_signed);
                    if (m->round_to_half) q0 = half8(q0, m, block);
                    product = _mm256_fmadd_ps(x0, q0, product);
                    if (m->offset) inputs = _mm256_add_ps(inputs, x0);
                }
            }
            if (m->round_to_half) {
                // The codes were made values (scaled and rounded) in the loop.
                total = _mm256_add_ps(total, product);
                continue;
            }
            // Σ x (q − o) s = s (Σ x q − o Σ x)
            if (m->offset) product = _mm256_fnmadd_ps(_mm256_set1_ps(m->offset[block]), inputs, product);
            total = _mm256_fmadd_ps(product, _mm256_set1_ps(scale_at(m, block)), total);
        }
        y[r - first_row] = sum8(total);
    }
}

/// 32 codes of 4 bits from 16 bytes, in order, as two vectors of 16 bytes.
AVX512 static inline void nibbles32(const uint8_t *bytes, int is_signed, __m128i *first, __m128i *second) {
    __m128i packed = _mm_loadu_si128((const __m128i *)bytes);
    __m128i mask = _mm_set1_epi8(0x0F);
    __m128i low = _mm_and_si128(packed, mask), high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
    __m128i a = _mm_unpacklo_epi8(low, high), b = _mm_unpackhi_epi8(low, high);
    if (is_signed) {
        a = _mm_sub_epi8(_mm_xor_si128(a, _mm_set1_epi8(8)), _mm_set1_epi8(8));
        b = _mm_sub_epi8(_mm_xor_si128(b, _mm_set1_epi8(8)), _mm_set1_epi8(8));
    }
    *first = a;
    *second = b;
}

AVX512 static inline __m512 widen16(__m128i bytes, int is_signed) {
    return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes));
}

/// Codes made values, (q − offset) · scale, rounded to the nearest half float.
AVX512 static inline __m512 half16(__m512 codes, const modelc_packed_matrix *m, long block) {
    __m512 value = _mm512_sub_ps(codes, _mm512_set1_ps(m->offset ? m->offset[block] : 0));
    value = _mm512_mul_ps(value, _mm512_set1_ps(scale_at(m, block)));
    return _mm512_cvtph_ps(_mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/// The 16 values a block's 4-bit codes stand for, by raw nibble: its table,
/// or (code − offset) · scale (rounded to half floats where asked).
AVX512 static inline __m512 nibble_values(const modelc_packed_matrix *m, long block) {
    if (m->table) return _mm512_loadu_ps(m->table + block * m->entries);
    // Nibbles 8 ... 15 of signed codes are −8 ... −1.
    __m512 codes = m->is_signed ? _mm512_set_ps(-1, -2, -3, -4, -5, -6, -7, -8, 7, 6, 5, 4, 3, 2, 1, 0)
                                : _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512 values = _mm512_sub_ps(codes, _mm512_set1_ps(m->offset ? m->offset[block] : 0));
    values = _mm512_mul_ps(values, _mm512_set1_ps(scale_at(m, block)));
    if (m->round_to_half) values = _mm512_cvtph_ps(_mm512_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return values;
}

/// 4-bit codes by lookup: each block's 16 values made once, then every code
/// is one permutation of them (no conversion, scaling or rounding per code).
/// Blocks are whole groups of 32 codes.
AVX512 static void dot_rows_nibbles_avx512(const modelc_packed_matrix *m, const float *x, float *y, long first_row, long row_count) {
    const long columns = m->columns, width = m->block_columns;
    const __m128i mask = _mm_set1_epi8(0x0F);
    for (long r = first_row; r < first_row + row_count; r++) {
        __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
        const uint8_t *bytes = m->codes + r * columns / 2;
        const long blocks = (r / m->block_rows) * (columns / width);
        for (long c = 0; c < columns; c += width) {
            const __m512 values = nibble_values(m, blocks + c / width);
            for (long j = c; j < c + width; j += 32) {
                __m128i packed = _mm_loadu_si128((const __m128i *)(bytes + j / 2));
                __m128i low = _mm_and_si128(packed, mask), high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
                __m512 w0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), values);
                __m512 w1 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(low, high)), values);
                even = _mm512_fmadd_ps(_mm512_loadu_ps(x + j), w0, even);
                odd = _mm512_fmadd_ps(_mm512_loadu_ps(x + j + 16), w1, odd);
            }
        }
        y[r - first_row] = _mm512_reduce_add_ps(_mm512_add_ps(even, odd));
    }
}

/// AVX-512 where blocks are whole groups of 32 codes (or halves); AVX2's loop otherwise.
AVX512 static void dot_rows_avx512(const modelc_packed_matrix *m, const float *x, float *y, long first_row, long row_count) {
    const long columns = m->columns, width = m->block_columns;
    if (m->bits != 16 && (width % 32 != 0 || columns % 32 != 0)) {
        dot_rows_avx2(m, x, y, first_row, row_count);
        return;
    }
    for (long r = first_row; r < first_row + row_count; r++) {
        __m512 total = _mm512_setzero_ps();
        if (m->bits == 16) {
            const uint8_t *row = m->codes + r * columns * 2;
            __m512 second = _mm512_setzero_ps();
            long c = 0;
            for (; c + 32 <= columns; c += 32) {
                total = _mm512_fmadd_ps(_mm512_loadu_ps(x + c), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + c * 2))), total);
                second = _mm512_fmadd_ps(_mm512_loadu_ps(x + c + 16), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + c * 2 + 32))), second);
            }
            float rest = 0;
            for (; c < columns; c++) rest += x[c] * element(m, r, c);
            y[r - first_row] = _mm512_reduce_add_ps(_mm512_add_ps(total, second)) + rest;
            continue;
        }
        const long scales = (r / m->block_rows) * (columns / width);
        for (long c = 0; c < columns; c += width) {
            __m512 product = _mm512_setzero_ps(), inputs = _mm512_setzero_ps();
            const long block = scales + c / width;
            if (m->bits == 4) {
                const uint8_t *bytes = m->codes + (r * columns + c) / 2;
                for (long j = 0; j < width; j += 32) {
                    __m128i a, b;
                    nibbles32(bytes + j / 2, m->is_signed, &a, &b);
                    __m512 x0 = _mm512_loadu_ps(x + c + j), x1 = _mm512_loadu_ps(x + c + j + 16);
                    __m512 q0 = widen16(a, m->is_signed), q1 = widen16(b, m->is_signed);
                    if (m->round_to_half) {
                        q0 = half16(q0, m, block);
                        q1 = half16(q1, m, block);
                    }
                    product = _mm512_fmadd_ps(x0, q0, product);
                    product = _mm512_fmadd_ps(x1, q1, product);
                    if (m->offset) inputs = _mm512_add_ps(inputs, _mm512_add_ps(x0, x1));
                }
            } else {
                const uint8_t *bytes = m->codes + r * columns + c;
                for (long j = 0; j < width; j += 32) {
                    __m512 x0 = _mm512_loadu_ps(x + c + j), x1 = _mm512_loadu_ps(x + c + j + 16);
                    __m512 q0 = widen16(_mm_loadu_si128((const __m128i *)(bytes + j)), m->is_signed);
                    __m512 q1 = widen16(_mm_loadu_si128((const __m128i *)(bytes + j + 16)), m->is_signed);
                    if (m->round_to_half) {
                        q0 = half16(q0, m, block);
                        q1 = half16(q1, m, block);
                    }
                    product = _mm512_fmadd_ps(x0, q0, product);
                    product = _mm512_fmadd_ps(x1, q1, product);
                    if (m->offset) inputs = _mm512_add_ps(inputs, _mm512_add_ps(x0, x1));
                }
            }
            if (m->round_to_half) {
                total = _mm512_add_ps(total, product);
                continue;
            }
            if (m->offset) product = _mm512_fnmadd_ps(_mm512_set1_ps(m->offset[block]), inputs, product);
            total = _mm512_fmadd_ps(product, _mm512_set1_ps(scale_at(m, block)), total);
        }
        y[r - first_row] = _mm512_reduce_add_ps(total);
    }
}
#endif

void modelc_packed_dot_rows(const modelc_packed_matrix *matrix, const float *x, float *y, long first_row, long row_count) {
    if (matrix->quantize_inputs && modelc_packed_dot_rows_integer(matrix, x, y, first_row, row_count)) return;
#if defined(__x86_64__) && defined(__clang__)
    if (matrix->bits == 4 && matrix->block_columns % 32 == 0 && matrix->columns % 32 == 0 && (matrix->table == NULL || matrix->entries >= 16)
        && modelc_cpu_level() >= 3) {
        dot_rows_nibbles_avx512(matrix, x, y, first_row, row_count);
        return;
    }
    if (fused_layout(matrix)) {
        int level = modelc_cpu_level();
        if (level >= 3) {
            dot_rows_avx512(matrix, x, y, first_row, row_count);
            return;
        }
        if (level >= 2) {
            dot_rows_avx2(matrix, x, y, first_row, row_count);
            return;
        }
    }
#endif
    for (long r = 0; r < row_count; r++) y[r] = dot_row_decoded(matrix, x, first_row + r);
}

void modelc_packed_combine_rows(const modelc_packed_matrix *matrix, const float *x, float *y, long first_column, long column_count) {
    float buffer[segment_columns];
    for (long i = 0; i < column_count; i++) y[i] = 0;
    for (long first = 0; first < column_count; first += segment_columns) {
        long count = column_count - first < segment_columns ? column_count - first : segment_columns;
        for (long r = 0; r < matrix->rows; r++) {
            decode_segment(matrix, r, first_column + first, count, buffer);
            const float weight = x[r];
            float *target = y + first;
            for (long i = 0; i < count; i++) target[i] += weight * buffer[i];
        }
    }
}
