#ifndef MODELC_QUANTIZED_INPUTS_H
#define MODELC_QUANTIZED_INPUTS_H

#include "CWeightKernels.h"

/// `modelc_packed_dot_rows` with the input taken as integers, where
/// `modelc_packed_dot_rows_quantize_inputs(m)`. Returns 0 (and writes
/// nothing) when it did not run: the layout does not fit, or an input is
/// not finite.
int modelc_packed_dot_rows_integer(const modelc_packed_matrix *m, const float *x, float *y, long first_row, long row_count);

#endif
