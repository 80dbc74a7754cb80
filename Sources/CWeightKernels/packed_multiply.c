// Matrix products of many input rows (a prefill) by 4- or 8-bit codes with
// per-block scales, the input taken as integers: each block of 32 inputs x
// of a row is rounded once to 16-bit integers n, x ≈ d n with
// d = max|x| / 32512 (the step the vector products' two 8-bit parts make,
// quantized_inputs.c: about 15 bits), and multiplied with the codes by
// 16-bit pair products (`vpdpwssd` on AVX-512 VNNI, `vpmaddwd` + `vpaddd`
// on AVX-512 BW and AVX2), 2 products per 32-bit lane, where float tiles
// multiply 1 per lane.
//
// The codes of 64 weight rows (outputs) are unpacked once into a thread's
// tile as 16-bit pairs, transposed: for each pair of columns (k, k + 1), the
// 64 outputs' codes side by side, so one vector of the tile holds 16 (or 8)
// outputs and one 32-bit input pair broadcast to every lane multiplies them
// all. A register block of input rows × tile outputs then sums the integer
// products over one input block of 32 columns, and each sum is scaled once
// per block:
//   Σ_c x (q − o) s ≈ s d (Σ_c q n − o Σ_c n)
// (q the codes as integers, signed or not; o the block's offset; Σ n made once
// per input block). docs/runtime.md has the measurements.
#include "CWeightKernels.h"

#include "CCPUFeatures.h"
#include "vector_helpers.h"

#include <string.h>

/// Outputs (weight rows) per tile, and input rows per register block of the AVX-512 and AVX2 kernels.
enum { tile_outputs = 64, block_inputs_avx512 = 3, block_inputs_avx2 = 4 };

/// Where the parts of a rounded input live: `rows` × `columns` 16-bit
/// integers, then per row and block of 32 its step d, then its Σ n.
typedef struct {
    const int16_t *values;
    const float *step;
    const float *sum;
} rounded_rows;

static rounded_rows rounded_parts(const void *rounded, long rows, long columns) {
    const int16_t *values = rounded;
    const float *step = (const float *)(values + rows * columns);
    return (rounded_rows){.values = values, .step = step, .sum = step + rows * (columns / 32)};
}

long modelc_rounded_rows_bytes(long rows, long columns) {
    return rows * columns * (long)sizeof(int16_t) + 2 * rows * (columns / 32) * (long)sizeof(float);
}

long modelc_packed_multiply_buffer_bytes(const modelc_packed_matrix *matrix) {
    const long pairs = matrix->columns / 2 * tile_outputs, blocks = matrix->columns / 32 * tile_outputs;
    const long most = block_inputs_avx512 > block_inputs_avx2 ? block_inputs_avx512 : block_inputs_avx2;
    return pairs * (long)sizeof(int32_t) + 2 * blocks * (long)sizeof(float) + most * tile_outputs * (long)sizeof(float);
}

int modelc_packed_multiply_quantize_inputs(const modelc_packed_matrix *m) {
#if defined(__x86_64__) && defined(__clang__)
    return m->quantize_inputs && (m->bits == 4 || m->bits == 8) && m->table == NULL && (m->scale != NULL || m->scale_halves != NULL)
        && m->block_columns % 32 == 0
        && m->columns % 32 == 0 && modelc_cpu_level() >= 2;
#else
    (void)m;
    return 0;
#endif
}

#if defined(__x86_64__) && defined(__clang__)

// MARK: Rounding the input

/// The factor taking a block whose largest magnitude is `most` to integers of at most 32512 (0 for zeros).
static inline float block_factor(float most) { return most > 0 ? 32512 / most : 0; }

AVX512 static int round_rows_avx512(const float *x, long rows, long columns, int16_t *values, float *step, float *sum) {
    const __m512 zero = _mm512_setzero_ps();
    for (long b = 0; b < rows * (columns / 32); b++) {
        const float *v = x + b * 32;
        const __m512 first = _mm512_loadu_ps(v), second = _mm512_loadu_ps(v + 16);
        // x · 0 is NaN for a NaN or an infinity, which the maximum may pass over.
        if (_mm512_cmp_ps_mask(_mm512_add_ps(_mm512_mul_ps(first, zero), _mm512_mul_ps(second, zero)), zero, _CMP_NEQ_UQ) != 0) return 0;
        const float most = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(first), _mm512_abs_ps(second)));
        const __m512 factor = _mm512_set1_ps(block_factor(most));
        const __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(first, factor)), c = _mm512_cvtps_epi32(_mm512_mul_ps(second, factor));
        _mm256_storeu_si256((__m256i *)(values + b * 32), _mm512_cvtepi32_epi16(a));
        _mm256_storeu_si256((__m256i *)(values + b * 32 + 16), _mm512_cvtepi32_epi16(c));
        step[b] = most / 32512;
        sum[b] = (float)_mm512_reduce_add_epi32(_mm512_add_epi32(a, c));
    }
    return 1;
}

AVX2 static int round_rows_avx2(const float *x, long rows, long columns, int16_t *values, float *step, float *sum) {
    for (long b = 0; b < rows * (columns / 32); b++) {
        __m256 parts[4];
        float biggest;
        if (!block32_avx2(x + b * 32, parts, &biggest)) return 0;
        const __m256 factor = _mm256_set1_ps(block_factor(biggest));
        __m256i n[4], total = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            n[i] = _mm256_cvtps_epi32(_mm256_mul_ps(parts[i], factor));
            total = _mm256_add_epi32(total, n[i]);
        }
        // packs works within 128-bit lanes: put the quarters back in order.
        const __m256i first = _mm256_permute4x64_epi64(_mm256_packs_epi32(n[0], n[1]), 0xD8);
        const __m256i second = _mm256_permute4x64_epi64(_mm256_packs_epi32(n[2], n[3]), 0xD8);
        _mm256_storeu_si256((__m256i *)(values + b * 32), first);
        _mm256_storeu_si256((__m256i *)(values + b * 32 + 16), second);
        step[b] = biggest / 32512;
        sum[b] = (float)(int)sum8(_mm256_cvtepi32_ps(total));
    }
    return 1;
}
#endif

int modelc_round_rows(const float *x, long rows, long columns, void *rounded) {
#if defined(__x86_64__) && defined(__clang__)
    if (columns % 32 != 0 || modelc_cpu_level() < 2) return 0;
    int16_t *values = rounded;
    float *step = (float *)(values + rows * columns), *sum = step + rows * (columns / 32);
    if (modelc_cpu_level() >= 3) return round_rows_avx512(x, rows, columns, values, step, sum);
    return round_rows_avx2(x, rows, columns, values, step, sum);
#else
    (void)x, (void)rows, (void)columns, (void)rounded;
    return 0;
#endif
}

#if defined(__x86_64__) && defined(__clang__)

// MARK: Unpacking a tile

/// The 16 × 16 bytes `rows` transposed: `columns[c]` holds byte c of every row.
AVX2 static inline void transpose16(const __m128i rows[16], __m128i columns[16]) {
    __m128i a[16], b[16], c[16];
    for (int i = 0; i < 8; i++) {
        a[i] = _mm_unpacklo_epi8(rows[2 * i], rows[2 * i + 1]);
        a[i + 8] = _mm_unpackhi_epi8(rows[2 * i], rows[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        for (int q = 0; q < 4; q++) {
            b[h * 8 + q] = _mm_unpacklo_epi16(a[h * 8 + 2 * q], a[h * 8 + 2 * q + 1]);
            b[h * 8 + 4 + q] = _mm_unpackhi_epi16(a[h * 8 + 2 * q], a[h * 8 + 2 * q + 1]);
        }
    }
    for (int g = 0; g < 4; g++) {
        for (int o = 0; o < 2; o++) {
            c[g * 4 + o] = _mm_unpacklo_epi32(b[g * 4 + 2 * o], b[g * 4 + 2 * o + 1]);
            c[g * 4 + 2 + o] = _mm_unpackhi_epi32(b[g * 4 + 2 * o], b[g * 4 + 2 * o + 1]);
        }
    }
    for (int p = 0; p < 8; p++) {
        columns[2 * p] = _mm_unpacklo_epi64(c[2 * p], c[2 * p + 1]);
        columns[2 * p + 1] = _mm_unpackhi_epi64(c[2 * p], c[2 * p + 1]);
    }
}

/// 16 outputs' first and second codes of a column pair (bytes, as stored) as
/// 16 lanes of 16-bit pairs (first in the low half), sign-extended when
/// `is_signed` (`top`: the codes' sign bit in each half, 0x0008 or 0x0080),
/// stored at `out`.
AVX2 static inline void store_pairs(__m128i first, __m128i second, int is_signed, __m256i top, int32_t *out) {
    for (int half = 0; half < 2; half++) {
        __m256i pair = _mm256_or_si256(_mm256_cvtepu8_epi32(first), _mm256_slli_epi32(_mm256_cvtepu8_epi32(second), 16));
        if (is_signed) pair = _mm256_sub_epi16(_mm256_xor_si256(pair, top), top);
        _mm256_storeu_si256((__m256i *)(out + 8 * half), pair);
        first = _mm_srli_si128(first, 8);
        second = _mm_srli_si128(second, 8);
    }
}

/// Writes the codes of weight rows `first` ..< `first + count` (count ≤ 64)
/// into `pairs` ([columns / 2][64] 16-bit pairs); the rows past `count` are
/// zeros. Inlined once per code width and signedness.
AVX2 static inline __attribute__((always_inline)) void unpack_codes(const modelc_packed_matrix *m, long first, long count, int bits, int is_signed,
                                                                    int32_t *pairs) {
    const long columns = m->columns, blocks = columns / 32;
    const __m128i nibble = _mm_set1_epi8(0x0F);
    const __m128i evens = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i top = _mm256_set1_epi16(bits == 4 ? 0x0008 : 0x0080);
    for (long group = 0; group < tile_outputs; group += 16) {
        for (long b = 0; b < blocks; b++) {
            __m128i low[16], high[16], first_codes[16], second_codes[16];
            for (long j = 0; j < 16; j++) {
                const long row = group + j;
                if (row >= count) {
                    low[j] = high[j] = _mm_setzero_si128();
                } else if (bits == 4) {
                    // A byte holds a column pair: the first code in its low nibble.
                    const __m128i bytes = _mm_loadu_si128((const __m128i *)(m->codes + (first + row) * columns / 2 + b * 16));
                    low[j] = _mm_and_si128(bytes, nibble);
                    high[j] = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
                } else {
                    const uint8_t *bytes = m->codes + (first + row) * columns + b * 32;
                    const __m128i a = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)bytes), evens);
                    const __m128i c = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(bytes + 16)), evens);
                    low[j] = _mm_unpacklo_epi64(a, c);
                    high[j] = _mm_unpackhi_epi64(a, c);
                }
            }
            transpose16(low, first_codes);
            transpose16(high, second_codes);
            for (long p = 0; p < 16; p++) store_pairs(first_codes[p], second_codes[p], is_signed, top, pairs + (b * 16 + p) * tile_outputs + group);
        }
    }
}

/// `unpack_codes`, then the scales and offsets of the rows' blocks into
/// `scales` and `offsets` ([columns / 32][64]; 0 past `count`).
AVX2 static void unpack_tile(const modelc_packed_matrix *m, long first, long count, int32_t *pairs, float *scales, float *offsets) {
    if (m->bits == 4) {
        if (m->is_signed) unpack_codes(m, first, count, 4, 1, pairs);
        else unpack_codes(m, first, count, 4, 0, pairs);
    } else {
        if (m->is_signed) unpack_codes(m, first, count, 8, 1, pairs);
        else unpack_codes(m, first, count, 8, 0, pairs);
    }
    const long per_row = m->columns / m->block_columns, per_block = m->block_columns / 32;
    for (long j = 0; j < tile_outputs; j++) {
        const long row_block = j < count ? ((first + j) / m->block_rows) * per_row : 0;
        for (long w = 0; w < per_row; w++) {
            const long at = row_block + w;
            const float scale = j >= count ? 0 : m->scale ? m->scale[at] : _cvtsh_ss(m->scale_halves[at]), offset = j < count && m->offset ? m->offset[at] : 0;
            for (long i = 0; i < per_block; i++) {
                scales[(w * per_block + i) * tile_outputs + j] = scale;
                offsets[(w * per_block + i) * tile_outputs + j] = offset;
            }
        }
    }
}

// MARK: Register blocks

/// The 32-bit input pair `p` of a row (two 16-bit integers), for a broadcast.
static inline int32_t input_pair(const int16_t *row, long p) {
    int32_t pair;
    memcpy(&pair, row + 2 * p, sizeof pair);
    return pair;
}

/// `rows` (≤ 3) input rows times the tile's 64 outputs, written to `out`
/// ([rows][64] floats); `multiply(sum, codes, inputs)` adds 16 lanes of pair
/// products. The integer sums of a block of 32 columns and the float totals
/// stay in registers (24 of the 32).
#define BLOCK_AVX512(name, attributes, multiply)                                                                                            \
    attributes static inline __attribute__((always_inline)) void name(const int32_t *pairs, const float *scales, const float *offsets,   \
                                                                      rounded_rows x, long columns, long rows, int has_offsets,       \
                                                                      float *out) {                                                    \
        const long blocks = columns / 32;                                                                                              \
        __m512 totals[block_inputs_avx512][4];                                                                                         \
        _Pragma("clang loop unroll(full)") for (long r = 0; r < rows; r++)                                                             \
            _Pragma("clang loop unroll(full)") for (int v = 0; v < 4; v++) totals[r][v] = _mm512_setzero_ps();                         \
        for (long b = 0; b < blocks; b++) {                                                                                            \
            __m512i sums[block_inputs_avx512][4];                                                                                      \
            _Pragma("clang loop unroll(full)") for (long r = 0; r < rows; r++)                                                         \
                _Pragma("clang loop unroll(full)") for (int v = 0; v < 4; v++) sums[r][v] = _mm512_setzero_si512();                    \
            const int32_t *codes = pairs + b * 16 * tile_outputs;                                                                      \
            for (long p = 0; p < 16; p++) {                                                                                            \
                __m512i w[4];                                                                                                          \
                _Pragma("clang loop unroll(full)") for (int v = 0; v < 4; v++) w[v] = _mm512_loadu_si512(codes + p * tile_outputs + 16 * v); \
                _Pragma("clang loop unroll(full)") for (long r = 0; r < rows; r++) {                                                  \
                    const __m512i n = _mm512_set1_epi32(input_pair(x.values + r * columns + b * 32, p));                              \
                    _Pragma("clang loop unroll(full)") for (int v = 0; v < 4; v++) sums[r][v] = multiply(sums[r][v], w[v], n);        \
                }                                                                                                                      \
            }                                                                                                                          \
            _Pragma("clang loop unroll(full)") for (long r = 0; r < rows; r++) {                                                      \
                const __m512 d = _mm512_set1_ps(x.step[r * blocks + b]), total = _mm512_set1_ps(x.sum[r * blocks + b]);               \
                _Pragma("clang loop unroll(full)") for (int v = 0; v < 4; v++) {                                                      \
                    __m512 product = _mm512_cvtepi32_ps(sums[r][v]);                                                                   \
                    if (has_offsets) product = _mm512_fnmadd_ps(_mm512_loadu_ps(offsets + b * tile_outputs + 16 * v), total, product); \
                    product = _mm512_mul_ps(product, _mm512_loadu_ps(scales + b * tile_outputs + 16 * v));                             \
                    totals[r][v] = _mm512_fmadd_ps(product, d, totals[r][v]);                                                          \
                }                                                                                                                      \
            }                                                                                                                          \
        }                                                                                                                              \
        _Pragma("clang loop unroll(full)") for (long r = 0; r < rows; r++)                                                             \
            _Pragma("clang loop unroll(full)") for (int v = 0; v < 4; v++) _mm512_storeu_ps(out + r * tile_outputs + 16 * v, totals[r][v]); \
    }

AVX512_VNNI static inline __m512i multiply_vnni(__m512i sum, __m512i codes, __m512i inputs) { return _mm512_dpwssd_epi32(sum, codes, inputs); }

AVX512 static inline __m512i multiply_bw(__m512i sum, __m512i codes, __m512i inputs) {
    return _mm512_add_epi32(sum, _mm512_madd_epi16(codes, inputs));
}

BLOCK_AVX512(block_vnni, AVX512_VNNI, multiply_vnni)
BLOCK_AVX512(block_bw, AVX512, multiply_bw)

/// AVX2: `rows` (≤ 4) input rows times 16 of the tile's outputs from `output`, summed into `out`.
AVX2 static inline __attribute__((always_inline)) void block_avx2(const int32_t *pairs, const float *scales, const float *offsets, rounded_rows x,
                                                                  long columns, long rows, int has_offsets, long output, float *out) {
    const long blocks = columns / 32;
    for (long b = 0; b < blocks; b++) {
        __m256i sums[block_inputs_avx2][2];
        for (long r = 0; r < rows; r++) sums[r][0] = sums[r][1] = _mm256_setzero_si256();
        const int32_t *codes = pairs + b * 16 * tile_outputs + output;
        for (long p = 0; p < 16; p++) {
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(codes + p * tile_outputs));
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)(codes + p * tile_outputs + 8));
            for (long r = 0; r < rows; r++) {
                const __m256i n = _mm256_set1_epi32(input_pair(x.values + r * columns + b * 32, p));
                sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(w0, n));
                sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(w1, n));
            }
        }
        for (long r = 0; r < rows; r++) {
            const __m256 d = _mm256_set1_ps(x.step[r * blocks + b]), total = _mm256_set1_ps(x.sum[r * blocks + b]);
            for (int v = 0; v < 2; v++) {
                const long at = b * tile_outputs + output + 8 * v;
                __m256 product = _mm256_cvtepi32_ps(sums[r][v]);
                if (has_offsets) product = _mm256_fnmadd_ps(_mm256_loadu_ps(offsets + at), total, product);
                product = _mm256_mul_ps(product, _mm256_loadu_ps(scales + at));
                float *target = out + r * tile_outputs + output + 8 * v;
                _mm256_storeu_ps(target, _mm256_fmadd_ps(product, d, _mm256_loadu_ps(target)));
            }
        }
    }
}

/// One register block for each row count, so that every loop over rows is unrolled.
#define BLOCK_ROWS(name, attributes, block)                                                                                            \
    attributes static void name(const int32_t *pairs, const float *scales, const float *offsets, rounded_rows x, long columns, long rows, \
                                int has_offsets, float *out) {                                                                           \
        switch (rows) {                                                                                                                \
        case 1: block(pairs, scales, offsets, x, columns, 1, has_offsets, out); break;                                                 \
        case 2: block(pairs, scales, offsets, x, columns, 2, has_offsets, out); break;                                                 \
        default: block(pairs, scales, offsets, x, columns, block_inputs_avx512, has_offsets, out); break;                              \
        }                                                                                                                              \
    }

BLOCK_ROWS(rows_vnni, AVX512_VNNI, block_vnni)
BLOCK_ROWS(rows_bw, AVX512, block_bw)

/// `rows` (≤ 4) input rows times the tile's 64 outputs, 16 at a time, written to `out` ([rows][64] floats).
AVX2 static void rows_avx2(const int32_t *pairs, const float *scales, const float *offsets, rounded_rows x, long columns, long rows,
                           int has_offsets, float *out) {
    memset(out, 0, (size_t)(rows * tile_outputs) * sizeof(float));
    for (long output = 0; output < tile_outputs; output += 16) {
        switch (rows) {
        case 1: block_avx2(pairs, scales, offsets, x, columns, 1, has_offsets, output, out); break;
        case 2: block_avx2(pairs, scales, offsets, x, columns, 2, has_offsets, output, out); break;
        case 3: block_avx2(pairs, scales, offsets, x, columns, 3, has_offsets, output, out); break;
        default: block_avx2(pairs, scales, offsets, x, columns, 4, has_offsets, output, out); break;
        }
    }
}
#endif

void modelc_packed_multiply_integer(const modelc_packed_matrix *m, const void *rounded, long inputs, float *y, long y_stride, long first_row,
                                    long row_count, void *buffer) {
#if defined(__x86_64__) && defined(__clang__)
    const long columns = m->columns, blocks = columns / 32;
    const int level = modelc_cpu_level();
    const long block = level >= 3 ? block_inputs_avx512 : block_inputs_avx2;
    int32_t *pairs = buffer;
    float *scales = (float *)(pairs + columns / 2 * tile_outputs), *offsets = scales + blocks * tile_outputs, *out = offsets + blocks * tile_outputs;
    const rounded_rows x = rounded_parts(rounded, inputs, columns);
    const long row_bytes = columns * m->bits / 8, end = first_row + row_count;
    for (long tile = first_row; tile < end; tile += tile_outputs) {
        const long count = end - tile < tile_outputs ? end - tile : tile_outputs;
        unpack_tile(m, tile, count, pairs, scales, offsets);
        // The next tile's codes are fetched into the cache while this one is multiplied, a part per register block.
        const uint8_t *next = m->codes + (tile + count) * row_bytes;
        const long ahead = (end - tile - count < tile_outputs ? end - tile - count : tile_outputs) * row_bytes;
        const long register_blocks = (inputs + block - 1) / block, part = (ahead / 64 + register_blocks - 1) / register_blocks * 64;
        for (long row = 0; row < inputs; row += block) {
            const long rows = inputs - row < block ? inputs - row : block;
            for (long at = row / block * part; at < ahead && at < (row / block + 1) * part; at += 64) _mm_prefetch((const char *)(next + at), _MM_HINT_T1);
            const rounded_rows part = {.values = x.values + row * columns, .step = x.step + row * blocks, .sum = x.sum + row * blocks};
            if (level >= 4) rows_vnni(pairs, scales, offsets, part, columns, rows, m->offset != NULL, out);
            else if (level >= 3) rows_bw(pairs, scales, offsets, part, columns, rows, m->offset != NULL, out);
            else rows_avx2(pairs, scales, offsets, part, columns, rows, m->offset != NULL, out);
            for (long r = 0; r < rows; r++) memcpy(y + (row + r) * y_stride + tile, out + r * tile_outputs, (size_t)count * sizeof(float));
        }
    }
#else
    (void)m, (void)rounded, (void)inputs, (void)y, (void)y_stride, (void)first_row, (void)row_count, (void)buffer;
#endif
}
