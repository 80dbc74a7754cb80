#ifndef MODELC_CVECTORMATH_H
#define MODELC_CVECTORMATH_H

/// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
/// in place over `count` floats, computed as x / (1 + e^(-2u)) with a
/// polynomial e^x the compiler vectorizes (AVX2 and FMA where the CPU has
/// them, SSE2 elsewhere).
void modelc_gelu_tanh(float *values, long count);

/// `x / (1 + e^-x)` (SiLU) in place over `count` floats, e^x within about
/// 2 ulp as in `modelc_gelu_tanh`.
void modelc_silu(float *values, long count);

/// Softmax of each of `rows` rows of `columns` floats, in place: e^(x - the
/// row's largest) with `modelc_silu`'s e^x (0 below e^-87.3, so a masked
/// column weighs nothing), over their sum. A row whose largest is -inf
/// (every column masked) or NaN becomes NaN.
void modelc_softmax_rows(float *values, long rows, long columns);

/// `count` floats as IEEE half floats at `halves` (little-endian, 2 bytes
/// each), each rounded to the nearest half, ties to even (as a `cast` to fp16);
/// `modelc_decode_halves` (CWeightKernels) widens them back.
void modelc_halves_from_floats(const float *values, long count, void *halves);

/// `y[r] = scale * sum over c of a[r][c] * x[c]` for `rows` rows of
/// `columns` half floats, row r starting `stride` halves after row r - 1
/// (attention's scores of one query row against keys kept as fp16).
void modelc_half_rows_dot(const void *a, long rows, long columns, long stride, const float *x, float scale, float *y);

/// `y[c] = scale * sum over r of w[r] * a[r][c]` for `rows` rows of
/// `columns` half floats, `stride` halves apart (attention's weighted sum of
/// values kept as fp16; keys given transposed). `y` is overwritten.
void modelc_half_rows_combine(const void *a, long rows, long columns, long stride, const float *w, float scale, float *y);

#endif
