#ifndef MODELC_CWEIGHTKERNELS_H
#define MODELC_CWEIGHTKERNELS_H

#include <stdint.h>

#include "CCPUFeatures.h"

/// A constant matrix of `rows` × `columns` held as its file stores it: codes
/// of `bits` bits packed row-major from the lowest bit of each byte up (MIL's
/// sub-byte storage; 8-bit codes one per byte), or IEEE half values
/// (`bits` 16, little-endian). Nothing is owned: the caller keeps every
/// pointer alive while the matrix is used.
///
/// An element's value, for codes: `table[block · entries + code]` when
/// `table` is set, else `(code − offset[block]) · scale[block]` (no offset:
/// 0; no scale: 1; the scale from `scale` or `scale_halves`). `block` numbers the element's block, row-major, when the
/// matrix is cut into blocks of `block_rows` × `block_columns`. Half values
/// are the values.
typedef struct modelc_packed_matrix {
    const uint8_t *codes;
    long rows;
    long columns;
    /// 1, 2, 3, 4, 6 or 8 for codes; 16 for half values.
    int bits;
    /// Whether codes are two's complement (int4, int8) rather than unsigned.
    int is_signed;
    const float *scale;
    /// The scales as IEEE half floats where the file stores them so (read in
    /// place), when `scale` is NULL.
    const uint16_t *scale_halves;
    const float *offset;
    const float *table;
    long entries;
    long block_rows;
    long block_columns;
    /// Whether each value is rounded to the nearest half float (a program
    /// whose decompressed weights are fp16).
    int round_to_half;
    /// Whether a vector product may take its input as integers of about 15
    /// bits, each block of 32 inputs x written d (256 h + l) with h and l
    /// 8-bit integers, d = max|x| / (127 · 256), and multiply the codes with h
    /// and l by integer dot products (4-bit codes with scales, and 8-bit ones
    /// on AVX-512 VNNI; blocks a whole number of 32 columns): set for fp16
    /// programs' weights, see
    /// docs/runtime.md. Each input then errs by at most d / 2, that is
    /// max|x| / 65024 over its block (fp16's own rounding: |x| / 2048).
    int quantize_inputs;
} modelc_packed_matrix;


/// Writes the window of `row_count` rows from `first_row` and `column_count`
/// columns from `first_column` as floats at `out`, its rows `out_stride`
/// floats apart.
void modelc_packed_decode_block(const modelc_packed_matrix *matrix, long first_row, long row_count, long first_column, long column_count,
                                float *out, long out_stride);

/// `y[r] = Σ_c x[c] · matrix[r, c]` for the rows `first_row` ..< `first_row + row_count`
/// (`y` indexed from `first_row`; `x` has `columns` floats): the product of a
/// vector by a `linear` layer's `[out, in]` weights.
void modelc_packed_dot_rows(const modelc_packed_matrix *matrix, const float *x, float *y, long first_row, long row_count);

/// `y[c] = Σ_r x[r] · matrix[r, c]` for the columns `first_column` ..<
/// `first_column + column_count` (`y` indexed from 0 at `first_column`; `x`
/// has `rows` floats): the product of a vector by `[in, out]` weights.
void modelc_packed_combine_rows(const modelc_packed_matrix *matrix, const float *x, float *y, long first_column, long column_count);

/// Whether `modelc_packed_dot_rows` multiplies this matrix with its input
/// as integers on this CPU (`quantize_inputs` set, the layout fits, and AVX2
/// or wider).
int modelc_packed_dot_rows_quantize_inputs(const modelc_packed_matrix *matrix);

/// Whether `modelc_packed_multiply_integer` multiplies this matrix on this
/// CPU: `quantize_inputs` set, 4- or 8-bit codes with scales (no table),
/// blocks and rows a whole number of 32 columns, AVX2 or wider.
int modelc_packed_multiply_quantize_inputs(const modelc_packed_matrix *matrix);

/// Bytes that `modelc_round_rows` writes for `rows` inputs of `columns` values.
long modelc_rounded_rows_bytes(long rows, long columns);

/// Rounds `rows` rows of `columns` floats at `x` (`columns` a multiple of 32)
/// to 16-bit integers per block of 32, x ≈ d n with d = max|x| / 32512 over
/// the block (each input errs by at most d / 2), into `rounded`
/// (`modelc_rounded_rows_bytes`, 4-byte aligned), once for every weight
/// tile and thread that reads it. Returns 0 when it did not round: an input
/// is not finite (the product must then take float tiles, so that NaN and
/// infinity reach the result as there) or the CPU has no AVX2.
int modelc_round_rows(const float *x, long rows, long columns, void *rounded);

/// Bytes of the buffer one thread's `modelc_packed_multiply_integer` works in.
long modelc_packed_multiply_buffer_bytes(const modelc_packed_matrix *matrix);

/// `y[i, r] = Σ_c x[i, c] · matrix[r, c]` for the `inputs` rows i of `x` as
/// `modelc_round_rows` rounded them (`rounded`) and the weight rows
/// `first_row` ..< `first_row + row_count`, where
/// `modelc_packed_multiply_quantize_inputs(matrix)`: a prefill's product by a
/// `linear` layer's `[out, in]` weights. `y`'s rows are `y_stride` floats
/// apart, its columns indexed from 0 (column r is weight row r); only the
/// columns asked for are written. `buffer` (`modelc_packed_multiply_buffer_bytes`)
/// is the calling thread's own; threads may share `rounded` and `y`,
/// each writing its own weight rows.
void modelc_packed_multiply_integer(const modelc_packed_matrix *matrix, const void *rounded, long inputs, float *y, long y_stride, long first_row,
                                    long row_count, void *buffer);

/// `count` little-endian half floats at `halves` as floats at `out`.
void modelc_decode_halves(const void *halves, long count, float *out);

#endif
