// Winograd's F(2×2, 3×3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016): Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A for a 4×4 input
// block d and a 3×3 kernel g, with
//   Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1],
//   G  = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1],
//   Aᵀ = [1 1 1 0; 0 1 −1 −1].
// Summed over input channels, the 16 elementwise products become 16 matrix
// products, run by OpenBLAS; the transforms run on 8 channels at a time.
#include "CWinograd.h"
#include "CCPUFeatures.h"

#include "COpenBLAS.h"

#include <stddef.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/// Tiles transformed and multiplied at a time: their transformed inputs and
/// products stay in the caches between the three steps.
enum { chunk_tiles = 256 };

int modelc_winograd_supported(void) {
#if defined(__x86_64__) && defined(__clang__)
    return modelc_cpu_level() >= 2;
#else
    return 0;
#endif
}

long modelc_winograd_tiles(const modelc_winograd_geometry *g) {
    return g->batch * ((g->out_height + 1) / 2) * ((g->out_width + 1) / 2);
}

/// Tiles of the first chunk of `tiles` (all of them, or `chunk_tiles`).
static inline long chunk_of(long tiles) {
    return tiles < chunk_tiles ? tiles : chunk_tiles;
}

long modelc_winograd_scratch_floats(const modelc_winograd_geometry *g, long tiles, long channels) {
    return 16L * chunk_of(tiles) * (g->inputs + channels);
}

void modelc_winograd_weights(const float *weights, long inputs, long outputs, float *transformed) {
    // Written in order (output channels innermost): weights of published size are tens of megabytes.
    for (long c = 0; c < inputs; c++) {
        for (long k = 0; k < outputs; k++) {
            const float *w = weights + (k * inputs + c) * 9;
            // G g: 4×3, then (G g) Gᵀ: 4×4.
            float gg[4][3];
            for (int j = 0; j < 3; j++) {
                gg[0][j] = w[j];
                gg[1][j] = 0.5f * (w[j] + w[3 + j] + w[6 + j]);
                gg[2][j] = 0.5f * (w[j] - w[3 + j] + w[6 + j]);
                gg[3][j] = w[6 + j];
            }
            for (int i = 0; i < 4; i++) {
                float row[4] = {gg[i][0], 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]), 0.5f * (gg[i][0] - gg[i][1] + gg[i][2]), gg[i][2]};
                for (int j = 0; j < 4; j++) transformed[((i * 4 + j) * inputs + c) * outputs + k] = row[j];
            }
        }
    }
}

#if defined(__x86_64__) && defined(__clang__)

#define TARGET __attribute__((target("avx2,fma")))

/// The first output row and column of tile `tile`, and its image.
static inline void tile_origin(const modelc_winograd_geometry *g, long tile, long *n, long *row, long *column) {
    long across = (g->out_width + 1) / 2, down = (g->out_height + 1) / 2;
    *n = tile / (across * down);
    long within = tile % (across * down);
    *row = 2 * (within / across);
    *column = 2 * (within % across);
}

/// Bᵀ d B of tiles [first, first + count) for every input channel, into
/// `transformed` as 16 matrices [count][inputs].
TARGET static void transform_input(const modelc_winograd_geometry *g, const float *input, long first, long count, float *transformed) {
    const long inputs = g->inputs, plane = count * inputs;
    for (long t = 0; t < count; t++) {
        long n, row, column;
        tile_origin(g, first + t, &n, &row, &column);
        long top = row - g->pad_top, left = column - g->pad_left;
        int inside = top >= 0 && left >= 0 && top + 4 <= g->height && left + 4 <= g->width;
        const float *image = input + n * g->input.image;
        for (long c = 0; c < inputs; c += 8) {
            const float *base = image + (c / 8) * g->input.block;
            __m256 d[4][4];
            for (int i = 0; i < 4; i++) {
                for (int j = 0; j < 4; j++) {
                    long y = top + i, x = left + j;
                    d[i][j] = inside || (y >= 0 && y < g->height && x >= 0 && x < g->width)
                        ? _mm256_loadu_ps(base + (y * g->width + x) * g->input.pixel) : _mm256_setzero_ps();
                }
            }
            // Bᵀ d, then (Bᵀ d) B.
            __m256 s[4][4];
            for (int j = 0; j < 4; j++) {
                s[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
                s[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
                s[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
                s[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
            }
            float *target = transformed + t * inputs + c;
            for (int i = 0; i < 4; i++) {
                _mm256_storeu_ps(target + (i * 4 + 0) * plane, _mm256_sub_ps(s[i][0], s[i][2]));
                _mm256_storeu_ps(target + (i * 4 + 1) * plane, _mm256_add_ps(s[i][1], s[i][2]));
                _mm256_storeu_ps(target + (i * 4 + 2) * plane, _mm256_sub_ps(s[i][2], s[i][1]));
                _mm256_storeu_ps(target + (i * 4 + 3) * plane, _mm256_sub_ps(s[i][1], s[i][3]));
            }
        }
    }
}

/// Aᵀ m A of tiles [first, first + count) for output channels
/// [first_channel, first_channel + channels), plus bias and residual,
/// clamped, into the output.
TARGET static void transform_output(const modelc_winograd_geometry *g, const float *products, long first, long count,
                                    long first_channel, long channels, const float *bias, const float *residual,
                                    float low, float high, float *output) {
    const long plane = count * channels;
    const __m256 lowest = _mm256_set1_ps(low), highest = _mm256_set1_ps(high);
    for (long t = 0; t < count; t++) {
        long n, row, column;
        tile_origin(g, first + t, &n, &row, &column);
        int rows = row + 1 < g->out_height ? 2 : 1, columns = column + 1 < g->out_width ? 2 : 1;
        for (long k = 0; k < channels; k += 8) {
            const float *source = products + t * channels + k;
            __m256 m[4][4];
            for (int p = 0; p < 16; p++) m[p / 4][p % 4] = _mm256_loadu_ps(source + p * plane);
            __m256 r[2][4];
            for (int j = 0; j < 4; j++) {
                r[0][j] = _mm256_add_ps(_mm256_add_ps(m[0][j], m[1][j]), m[2][j]);
                r[1][j] = _mm256_sub_ps(_mm256_sub_ps(m[1][j], m[2][j]), m[3][j]);
            }
            long channel = first_channel + k;
            __m256 b = bias ? _mm256_loadu_ps(bias + channel) : _mm256_setzero_ps();
            long offset = n * g->output.image + (channel / 8) * g->output.block;
            for (int i = 0; i < rows; i++) {
                __m256 y[2] = {_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[i][0], r[i][1]), r[i][2]), b),
                               _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(r[i][1], r[i][2]), r[i][3]), b)};
                for (int j = 0; j < columns; j++) {
                    long at = offset + ((row + i) * g->out_width + column + j) * g->output.pixel;
                    __m256 value = residual ? _mm256_add_ps(y[j], _mm256_loadu_ps(residual + at)) : y[j];
                    _mm256_storeu_ps(output + at, _mm256_min_ps(_mm256_max_ps(value, lowest), highest));
                }
            }
        }
    }
}

void modelc_winograd_run(const modelc_winograd_geometry *g, const float *input, const float *transformed, const float *bias,
                         const float *residual, float low, float high, float *output, long first_tile, long end_tile,
                         long first_channel, long end_channel, float *scratch) {
    const long inputs = g->inputs, channels = end_channel - first_channel;
    float *inputs_transformed = scratch, *products = scratch + 16L * chunk_of(end_tile - first_tile) * inputs;
    for (long first = first_tile; first < end_tile; first += chunk_tiles) {
        long count = chunk_of(end_tile - first);
        transform_input(g, input, first, count, inputs_transformed);
        for (int p = 0; p < 16; p++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)count, (int)channels, (int)inputs, 1.0f,
                        inputs_transformed + p * count * inputs, (int)inputs, transformed + p * inputs * g->outputs + first_channel,
                        (int)g->outputs, 0.0f, products + p * count * channels, (int)channels);
        }
        transform_output(g, products, first, count, first_channel, channels, bias, residual, low, high, output);
    }
}

#else

void modelc_winograd_run(const modelc_winograd_geometry *g, const float *input, const float *transformed, const float *bias,
                         const float *residual, float low, float high, float *output, long first_tile, long end_tile,
                         long first_channel, long end_channel, float *scratch) {
    // Never called: modelc_winograd_supported() is 0 here.
    (void)g; (void)input; (void)transformed; (void)bias; (void)residual; (void)low; (void)high; (void)output;
    (void)first_tile; (void)end_tile; (void)first_channel; (void)end_channel; (void)scratch;
}

#endif
