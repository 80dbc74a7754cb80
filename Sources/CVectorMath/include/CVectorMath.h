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

#endif
