// Vector products of 4-bit (and, on AVX-512 VNNI, 8-bit) codes whose input
// is taken as integers: each block of 32 inputs x is written n = 256 h + l
// with h and l 8-bit integers, x ≈ d n, d = max|x| / (127 · 256) (h is x
// rounded to the nearest multiple of max|x| / 127, l what is left rounded to
// 1/256 of that: about 15 bits, some thirty times finer than the fp16
// rounding the program itself makes). The codes are multiplied with h and l
// by integer dot-product instructions (`vpdpbusd` on AVX-512 VNNI,
// `vpmaddubsw` then `vpmaddwd` on AVX-512 BW), 64 codes per instruction, where
// the float loops widen and multiply 16 at a time. AVX2 has no instruction
// that multiplies and adds 8-bit pairs into 32 bits (two per part made four
// multiplies per 32 codes, the step's bound there): it takes n whole, as
// 16-bit integers, against the codes widened to 16 bits, two `vpmaddwd` per
// 32 codes. Only fp16 programs' weights ask for it (`quantize_inputs`);
// docs/runtime.md has the measurements.
//
// The codes are read as unsigned u (signed codes: u = q + 2^(bits−1), by
// flipping each code's top bit), so a block of the product is
//   Σ x (q − o) s ≈ s d (Σ u n − (b + o) Σ n)
// with b 2^(bits−1) for signed codes (else 0) and o the block's offset: Σ u n
// is the integer dot product, and d Σ n is made once per input block, so the
// correction costs one multiply-add per block.
#include "quantized_inputs.h"

#include "CCPUFeatures.h"
#include "vector_helpers.h"

#include <stdlib.h>

#if defined(__x86_64__) && defined(__clang__)

/// Inputs taken as integers (`high`, `low`: n = 256 h + l), laid out as the
/// codes come out of their bytes: in each group of `group` inputs (64 on
/// AVX-512, 32 on AVX2), the even-numbered ones first, then the odd-numbered
/// (a byte of codes holds an even-numbered code in its low nibble, the next
/// in its high nibble). A last group of 64 with 32 inputs is filled with 0.
typedef struct {
    int8_t *high;
    int8_t *low;
    /// AVX2: n = 256 h + l whole, per block of 32 inputs its 16 even-numbered then its 16 odd-numbered (in `high`'s memory).
    int16_t *whole;
    /// AVX2: per block of 32 inputs, the weight scale of the row being multiplied times the input's step.
    float *factors;
    /// Per block of 32 inputs: d = max|x| / (127 · 256), and d · Σ n (the block's sum as rounded).
    float *step;
    float *sum;
    /// d · Σ n per block of the weights' columns (`sum` added up `block_columns / 32` at a time).
    float *weight_sum;
    /// Per block of 32 inputs, the weight block (of the row) its columns fall in.
    int32_t *weight_block;
    /// One row of half-float weight scales widened (`scale_halves`), of the
    /// row of blocks starting at block `scales_from` (−1: none yet).
    float *row_scales;
    long scales_from;
    long group;
    long groups;
} integer_input;

/// The scale that takes a block of finite inputs whose largest magnitude is
/// `most` to integers of at most 127 (0 for a block of zeros). A block with a
/// NaN or an infinity is found before (x · 0 is NaN for them) and sends the
/// product to the float loops, so that it reaches the result as it would there.
static inline float block_scale(float most) { return most > 0 ? 127 / most : 0; }

/// Per lane of a group's 16 integer sums, the weight scale times the input
/// step of the input block the lane belongs to (`lanes`: 0 for the group's
/// first block of 32, 1 for its second; blocks `b`, `b + 1`).
AVX512 static inline __m512 group_factors(const integer_input *input, const float *scales, long b, __m512i lanes) {
    __m128 pair = _mm_unpacklo_ps(_mm_load_ss(scales + input->weight_block[b]), _mm_load_ss(scales + input->weight_block[b + 1]));
    pair = _mm_mul_ps(pair, _mm_castpd_ps(_mm_load_sd((const double *)(input->step + b))));
    return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(pair));
}

/// AVX2: one group is one block of 32 inputs, n = 256 h + l kept whole as 16-bit integers (|n| ≤ 127 · 256 + 128).
AVX2 static int round_input_avx2(const float *x, long columns, integer_input *input) {
    // Within each 128-bit lane of 8 integers: the even-numbered, then the odd-numbered.
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (long b = 0; b < columns / 32; b++) {
        __m256 values[4];
        float biggest;
        if (!block32_avx2(x + b * 32, values, &biggest)) return 0;
        const __m256 scale = _mm256_set1_ps(block_scale(biggest)), fraction = _mm256_set1_ps(256);
        __m256i whole[4], total = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            __m256 scaled = _mm256_mul_ps(values[i], scale);
            __m256i high = _mm256_cvtps_epi32(scaled);
            __m256i low = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_sub_ps(scaled, _mm256_cvtepi32_ps(high)), fraction));
            whole[i] = _mm256_add_epi32(_mm256_slli_epi32(high, 8), low);
            total = _mm256_add_epi32(total, whole[i]);
        }
        // In order (packing interleaves the lanes; the quads put them back), then evens before odds within each
        // lane, then the quads gathered: inputs 0–15 as [evens | odds], and 16–31 the same.
        __m256i first = _mm256_permute4x64_epi64(_mm256_packs_epi32(whole[0], whole[1]), 0xD8);
        __m256i second = _mm256_permute4x64_epi64(_mm256_packs_epi32(whole[2], whole[3]), 0xD8);
        first = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(first, split), 0xD8);
        second = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(second, split), 0xD8);
        _mm256_storeu_si256((__m256i *)(input->whole + b * 32), _mm256_permute2x128_si256(first, second, 0x20));
        _mm256_storeu_si256((__m256i *)(input->whole + b * 32 + 16), _mm256_permute2x128_si256(first, second, 0x31));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
        input->step[b] = biggest / (127 * 256);
        input->sum[b] = input->step[b] * (float)_mm_cvtsi128_si32(t);
    }
    return 1;
}

/// AVX-512: groups of 64 inputs, two blocks of 32; `split`: even columns first (4-bit codes), else in order (bytes).
AVX512 static int round_input_avx512(const float *x, long columns, integer_input *input, int split_columns) {
    const __m512 zero = _mm512_setzero_ps(), fraction = _mm512_set1_ps(256);
    const __m512i split = _mm512_set4_epi32(0x0F0D0B09, 0x07050301, 0x0E0C0A08, 0x06040200);
    const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    for (long g = 0; g < input->groups; g++) {
        __m128i high[4], low[4];
        for (int half = 0; half < 2; half++) {
            const long b = 2 * g + half;
            if (b * 32 >= columns) {
                // The padding of a last group of 32 inputs.
                high[2 * half] = high[2 * half + 1] = low[2 * half] = low[2 * half + 1] = _mm_setzero_si128();
                input->step[b] = input->sum[b] = 0;
                continue;
            }
            __m512 first = _mm512_loadu_ps(x + b * 32), second = _mm512_loadu_ps(x + b * 32 + 16);
            const float biggest = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(first), _mm512_abs_ps(second)));
            // x · 0 is NaN for a NaN or an infinity.
            __mmask16 special = _mm512_cmp_ps_mask(_mm512_add_ps(_mm512_mul_ps(first, zero), _mm512_mul_ps(second, zero)), zero, _CMP_NEQ_UQ);
            if (special != 0) return 0;
            const __m512 scale = _mm512_set1_ps(block_scale(biggest));
            __m512 a = _mm512_mul_ps(first, scale), c = _mm512_mul_ps(second, scale);
            __m512i ha = _mm512_cvtps_epi32(a), hc = _mm512_cvtps_epi32(c);
            __m512i la = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(a, _mm512_cvtepi32_ps(ha)), fraction));
            __m512i lc = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(c, _mm512_cvtepi32_ps(hc)), fraction));
            int total = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(ha, 8), la), _mm512_add_epi32(_mm512_slli_epi32(hc, 8), lc)));
            high[2 * half] = _mm512_cvtsepi32_epi8(ha);
            high[2 * half + 1] = _mm512_cvtsepi32_epi8(hc);
            low[2 * half] = _mm512_cvtsepi32_epi8(la);
            low[2 * half + 1] = _mm512_cvtsepi32_epi8(lc);
            input->step[b] = biggest / (127 * 256);
            input->sum[b] = input->step[b] * (float)total;
        }
        __m512i h = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(high[0]), high[1], 1), high[2], 2), high[3], 3);
        __m512i l = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(low[0]), low[1], 1), low[2], 2), low[3], 3);
        if (split_columns) {
            h = _mm512_permutexvar_epi64(order, _mm512_shuffle_epi8(h, split));
            l = _mm512_permutexvar_epi64(order, _mm512_shuffle_epi8(l, split));
        }
        _mm512_storeu_si512(input->high + g * 64, h);
        _mm512_storeu_si512(input->low + g * 64, l);
    }
    return 1;
}

/// The weight scales of the row of blocks starting at block `first`, as
/// floats: where they are, or widened from half floats into the input's
/// buffer (once per row of blocks).
AVX2 static inline const float *row_scales(const modelc_packed_matrix *m, integer_input *input, long first) {
    if (m->scale) return m->scale + first;
    if (input->scales_from != first) {
        const long count = m->columns / m->block_columns;
        const uint16_t *halves = m->scale_halves + first;
        long i = 0;
        for (; i + 8 <= count; i += 8) _mm256_storeu_ps(input->row_scales + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(halves + i))));
        for (; i < count; i++) input->row_scales[i] = _cvtsh_ss(halves[i]);
        input->scales_from = first;
    }
    return input->row_scales;
}

/// Σ over a row's weight blocks of s (b + o) d Σ n: what the unsigned
/// codes' dot products add beyond the codes' values (`input->weight_sum`
/// holds d Σ n per weight block).
AVX2 static float correction(const modelc_packed_matrix *m, const integer_input *input, const float *scales, const float *offsets) {
    const long count = m->columns / m->block_columns;
    const float bias = m->is_signed ? (float)(1 << (m->bits - 1)) : 0;
    if (bias == 0 && offsets == NULL) return 0;
    const float *sums = input->weight_sum;
    __m256 first = _mm256_setzero_ps(), second = _mm256_setzero_ps();
    const __m256 shift = _mm256_set1_ps(bias);
    long i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 factor = _mm256_loadu_ps(scales + i);
        if (offsets) factor = _mm256_mul_ps(factor, _mm256_add_ps(shift, _mm256_loadu_ps(offsets + i)));
        if ((i / 8) & 1) second = _mm256_fmadd_ps(factor, _mm256_loadu_ps(sums + i), second);
        else first = _mm256_fmadd_ps(factor, _mm256_loadu_ps(sums + i), first);
    }
    float total = sum8(_mm256_add_ps(first, second)) * (offsets ? 1 : bias);
    for (; i < count; i++) total += scales[i] * (bias + (offsets ? offsets[i] : 0)) * sums[i];
    return total;
}

/// How far ahead of the codes being multiplied a row's loop asks for its
/// bytes: the hardware prefetchers stop at each 4 KiB page, the loop does
/// not (a 4096 × 11008 int4 product on one thread, 945 → 830 µs).
#define PREFETCH_AHEAD 8192

/// AVX2: 32 codes (one input block) per step, two steps at a time on two sums. A block's 16 bytes widened to
/// 16 bits hold an even-numbered code in each low nibble and the next in the high one: the codes of even and of odd
/// columns, against the input's 16 evens and 16 odds (`whole`).
AVX2 static void dot_rows_avx2(const modelc_packed_matrix *m, integer_input *input, float *y, long first_row, long row_count) {
    const long columns = m->columns, per_row = columns / m->block_columns, blocks = columns / 32, per_block = m->block_columns / 32;
    const __m256i nibble = _mm256_set1_epi16(0x0F);
    const __m128i flip = _mm_set1_epi8(m->is_signed ? (char)0x88 : 0);
    const int16_t *whole = input->whole;
    // A decoder's weights (half-float scales per block of 32 of one row, no offsets): each row's scales widened, its
    // factors and its bias correction made in one pass over them, the correction summed with the products at the end.
    const int halves_per_block = per_block == 1 && m->scale == NULL && m->scale_halves != NULL && m->offset == NULL && blocks % 8 == 0;
    const __m256 minus_bias = _mm256_set1_ps(m->is_signed ? -8 : 0);
    for (long r = first_row; r < first_row + row_count; r++) {
        const uint8_t *bytes = m->codes + r * columns / 2;
        const long row_block = (m->block_rows == 1 ? r : r / m->block_rows) * per_row;
        float *factors = input->factors;
        __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
        long b = 0;
        const float *scales = NULL, *offsets = NULL;
        if (halves_per_block) {
            const uint16_t *halves = m->scale_halves + row_block;
            __m256 correction = _mm256_setzero_ps();
            for (; b < blocks; b += 8) {
                const __m256 scale = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(halves + b)));
                _mm256_storeu_ps(factors + b, _mm256_mul_ps(scale, _mm256_loadu_ps(input->step + b)));
                correction = _mm256_fmadd_ps(scale, _mm256_loadu_ps(input->weight_sum + b), correction);
            }
            even = _mm256_mul_ps(correction, minus_bias);
        } else {
            // Each block's factor, the weight scale times the input step, once per row.
            scales = row_scales(m, input, row_block);
            offsets = m->offset ? m->offset + row_block : NULL;
            if (per_block == 1) {
                for (; b + 8 <= blocks; b += 8) _mm256_storeu_ps(factors + b, _mm256_mul_ps(_mm256_loadu_ps(scales + b), _mm256_loadu_ps(input->step + b)));
            }
            for (; b < blocks; b++) factors[b] = scales[b / per_block] * input->step[b];
        }
#define MODELC_BLOCK_PRODUCT(b, sum)                                                                                              \
        do {                                                                                                                      \
            __m256i codes = _mm256_cvtepu8_epi16(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(bytes + (b) * 16)), flip));   \
            __m256i products = _mm256_add_epi32(                                                                                  \
                _mm256_madd_epi16(_mm256_and_si256(codes, nibble), _mm256_loadu_si256((const __m256i *)(whole + (b) * 32))),      \
                _mm256_madd_epi16(_mm256_srli_epi16(codes, 4), _mm256_loadu_si256((const __m256i *)(whole + (b) * 32 + 16))));    \
            sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(products), _mm256_broadcast_ss(factors + (b)), sum);                         \
        } while (0)
        for (b = 0; b + 2 <= blocks; b += 2) {
            if ((b & 3) == 0) _mm_prefetch((const char *)(bytes + b * 16) + PREFETCH_AHEAD, _MM_HINT_T0);
            MODELC_BLOCK_PRODUCT(b, even);
            MODELC_BLOCK_PRODUCT(b + 1, odd);
        }
        if (b < blocks) MODELC_BLOCK_PRODUCT(b, even);
#undef MODELC_BLOCK_PRODUCT
        y[r - first_row] = sum8(_mm256_add_ps(even, odd)) - (halves_per_block ? 0 : correction(m, input, scales, offsets));
    }
}

/// The 64 codes of 32 bytes at `bytes` (read once, into both halves of the
/// register) as unsigned bytes: the low nibbles, then the high nibbles, each
/// flipped by `flip` (8 for signed codes: u = q + 8).
AVX512 static inline __m512i group_codes(const uint8_t *bytes, __m512i flip) {
    // 16-bit lanes of the upper half shift by 4; then (· & 0x0F) ^ flip in one ternary logic op.
    const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)bytes));
    return _mm512_ternarylogic_epi32(_mm512_srlv_epi16(raw, shifts), _mm512_set1_epi8(0x0F), flip, 0x6A);
}

/// One group of 64 codes times the input's integers from column `c`,
/// scaled by `factors` and added to `total`. `vpdpbusd` (or `vpmaddubsw`
/// and `vpmaddwd`) gives 16 sums of 4 products: lanes 0–3 and 8–11 belong
/// to the group's first input block, 4–7 and 12–15 to its second.
#define GROUP_PRODUCT(name, attributes, multiply)                                                                                      \
    attributes static inline __m512 name(__m512i codes, const integer_input *input, long c, __m512 factors, __m512 total) {            \
        __m512i products = _mm512_add_epi32(_mm512_slli_epi32(multiply(codes, _mm512_loadu_si512(input->high + c)), 8),               \
                                            multiply(codes, _mm512_loadu_si512(input->low + c)));                                      \
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), factors, total);                                                          \
    }

AVX512 static inline __m512i products_bw(__m512i codes, __m512i integers) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(codes, integers), _mm512_set1_epi16(1));
}

AVX512_VNNI static inline __m512i products_vnni(__m512i codes, __m512i integers) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, integers);
}

GROUP_PRODUCT(group_bw, AVX512, products_bw)
GROUP_PRODUCT(group_vnni, AVX512_VNNI, products_vnni)

/// AVX-512: 64 codes per step, two groups at a time on two sums; a last
/// group of 32 codes reads 16 bytes (the rest is padding, whose inputs are 0).
/// Where each weight block is one input block (`block_columns` 32) and no
/// group is padded, a group's two scales are adjacent and read as one pair.
#define DOT_ROWS_AVX512(name, attributes, group)                                                                                        \
    attributes static void name(const modelc_packed_matrix *m, integer_input *input, float *y, long first_row, long row_count) {        \
        const long columns = m->columns, per_row = columns / m->block_columns;                                                         \
        const __m512i flip = _mm512_set1_epi8(m->is_signed ? 8 : 0);                                                                   \
        const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);                                      \
        const int paired = m->block_columns == 32 && columns % 64 == 0;                                                                \
        for (long r = first_row; r < first_row + row_count; r++) {                                                                      \
            const uint8_t *bytes = m->codes + r * columns / 2;                                                                         \
            const long row_block = (r / m->block_rows) * per_row;                                                                      \
            const float *scales = row_scales(m, input, row_block), *offsets = m->offset ? m->offset + row_block : NULL;                \
            __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();                                                             \
            long c = 0;                                                                                                                \
            if (paired) {                                                                                                              \
                /* Two groups (four blocks) per step: their four scales times their four input steps. */                               \
                const __m512i next = _mm512_set1_epi32(2);                                                                             \
                for (; c + 128 <= columns; c += 128) {                                                                                 \
                    _mm_prefetch((const char *)(bytes + c / 2) + PREFETCH_AHEAD, _MM_HINT_T0);                                         \
                    const __m128 four = _mm_mul_ps(_mm_loadu_ps(scales + c / 32), _mm_loadu_ps(input->step + c / 32));                  \
                    const __m512 factors = _mm512_castps128_ps512(four);                                                               \
                    even = group(group_codes(bytes + c / 2, flip), input, c, _mm512_permutexvar_ps(lanes, factors), even);             \
                    odd = group(group_codes(bytes + c / 2 + 32, flip), input, c + 64,                                                  \
                                _mm512_permutexvar_ps(_mm512_add_epi32(lanes, next), factors), odd);                                   \
                }                                                                                                                      \
                if (c < columns) {                                                                                                     \
                    even = group(group_codes(bytes + c / 2, flip), input, c, group_factors(input, scales, c / 32, lanes), even);       \
                }                                                                                                                      \
            } else {                                                                                                                   \
                for (; c + 64 <= columns; c += 64) {                                                                                   \
                    even = group(group_codes(bytes + c / 2, flip), input, c, group_factors(input, scales, c / 32, lanes), even);       \
                }                                                                                                                      \
                if (c < columns) {                                                                                                     \
                    /* A last group of 32 codes: 16 bytes, the rest of the register 0 (its inputs are 0). */                           \
                    __m512i raw = _mm512_broadcast_i64x4(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(bytes + c / 2)))); \
                    const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);                       \
                    __m512i codes = _mm512_ternarylogic_epi32(_mm512_srlv_epi16(raw, shifts), _mm512_set1_epi8(0x0F), flip, 0x6A);   \
                    odd = group(codes, input, c, group_factors(input, scales, c / 32, lanes), odd);                                    \
                }                                                                                                                      \
            }                                                                                                                          \
            y[r - first_row] = _mm512_reduce_add_ps(_mm512_add_ps(even, odd)) - correction(m, input, scales, offsets);               \
        }                                                                                                                              \
    }

DOT_ROWS_AVX512(dot_rows_avx512_bw, AVX512, group_bw)
DOT_ROWS_AVX512(dot_rows_avx512_vnni, AVX512_VNNI, group_vnni)

/// 8-bit codes on AVX-512 VNNI: 64 codes, in order, per step (the input not split by column
/// parity); lanes 0–7 belong to the group's first input block, 8–15 to its second. A last group
/// of 32 codes reads 32 bytes (the rest is padding, whose inputs are 0).
AVX512_VNNI static void dot_rows_bytes_vnni(const modelc_packed_matrix *m, integer_input *input, float *y, long first_row, long row_count) {
    const long columns = m->columns, per_row = columns / m->block_columns;
    const __m512i flip = _mm512_set1_epi8(m->is_signed ? (char)0x80 : 0);
    const __m512i lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    for (long r = first_row; r < first_row + row_count; r++) {
        const uint8_t *bytes = m->codes + r * columns;
        const long row_block = (r / m->block_rows) * per_row;
        const float *scales = row_scales(m, input, row_block), *offsets = m->offset ? m->offset + row_block : NULL;
        __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
        for (long c = 0; c < columns; c += 64) {
            __m512i raw = c + 64 <= columns ? _mm512_loadu_si512(bytes + c) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, bytes + c);
            __m512i codes = _mm512_xor_si512(raw, flip);
            __m512i products = _mm512_add_epi32(_mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, _mm512_loadu_si512(input->high + c)), 8),
                                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, _mm512_loadu_si512(input->low + c)));
            const __m512 factors = group_factors(input, scales, c / 32, lanes);
            if ((c / 64) & 1) odd = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), factors, odd);
            else even = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), factors, even);
        }
        y[r - first_row] = _mm512_reduce_add_ps(_mm512_add_ps(even, odd)) - correction(m, input, scales, offsets);
    }
}
#endif

int modelc_packed_dot_rows_quantize_inputs(const modelc_packed_matrix *m) {
#if defined(__x86_64__) && defined(__clang__)
    // 8-bit codes need VNNI: vpmaddubsw's 16-bit pair sums would saturate at 255 · 127 · 2.
    const int level = modelc_cpu_level();
    return m->quantize_inputs && (m->bits == 4 ? level >= 2 : (m->bits == 8 && level >= 4)) && m->table == NULL && (m->scale != NULL || m->scale_halves != NULL)
        && m->block_columns % 32 == 0 && m->columns % 32 == 0;
#else
    (void)m;
    return 0;
#endif
}

int modelc_packed_dot_rows_integer(const modelc_packed_matrix *m, const float *x, float *y, long first_row, long row_count) {
#if defined(__x86_64__) && defined(__clang__)
    if (!modelc_packed_dot_rows_quantize_inputs(m)) return 0;
    const int level = modelc_cpu_level();
    const long group = level >= 3 ? 64 : 32, groups = (m->columns + group - 1) / group, blocks = groups * group / 32;
    const long weight_blocks = m->columns / m->block_columns, per_block = m->block_columns / 32;
    // One allocation: the integers (64-byte aligned; AVX2's 16-bit ones take both halves), then per input block its step, sum,
    // weight block and factor, then per weight block of a row the sums and the widened scales.
    void *memory = NULL;
    size_t bytes = (size_t)(2 * groups * group) + (size_t)blocks * (3 * sizeof(float) + sizeof(int32_t)) + (size_t)weight_blocks * 2 * sizeof(float);
    if (posix_memalign(&memory, 64, bytes) != 0) return 0;
    integer_input input = {.high = memory, .low = (int8_t *)memory + groups * group, .whole = memory, .group = group, .groups = groups};
    input.step = (float *)((int8_t *)memory + 2 * groups * group);
    input.sum = input.step + blocks;
    input.weight_block = (int32_t *)(input.sum + blocks);
    input.factors = (float *)(input.weight_block + blocks);
    input.weight_sum = input.factors + blocks;
    input.row_scales = input.weight_sum + weight_blocks;
    input.scales_from = -1;
    int rounded = level >= 3 ? round_input_avx512(x, m->columns, &input, m->bits == 4) : round_input_avx2(x, m->columns, &input);
    if (rounded) {
        // A padding block (step 0) names the row's last weight block, so that its scale is read within the row.
        for (long b = 0; b < blocks; b++) input.weight_block[b] = (int32_t)((b < m->columns / 32 ? b : m->columns / 32 - 1) / per_block);
        for (long w = 0; w < weight_blocks; w++) {
            float total = 0;
            for (long i = 0; i < per_block; i++) total += input.sum[w * per_block + i];
            input.weight_sum[w] = total;
        }
        if (m->bits == 8) dot_rows_bytes_vnni(m, &input, y, first_row, row_count);
        else if (level >= 4) dot_rows_avx512_vnni(m, &input, y, first_row, row_count);
        else if (level >= 3) dot_rows_avx512_bw(m, &input, y, first_row, row_count);
        else dot_rows_avx2(m, &input, y, first_row, row_count);
    }
    free(memory);
    return rounded;
#else
    (void)m, (void)x, (void)y, (void)first_row, (void)row_count;
    return 0;
#endif
}
