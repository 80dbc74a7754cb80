#ifndef MODELC_CWINOGRAD_H
#define MODELC_CWINOGRAD_H

/* 3×3 convolutions with stride 1 as Winograd's F(2×2, 3×3): each 2×2 block
   of outputs (a tile) from a 4×4 block of the input, in 16 products of
   (tiles × input channels) by (input channels × output channels) matrices
   instead of 36 multiply-adds per output and input channel: 2.25 times
   fewer. Images are channels-last ([N, H, W, C]) or in blocks of 8 channels
   ([N, C/8, H, W, 8]); channel counts are multiples of 8. The transforms
   need AVX2 and FMA; the products are OpenBLAS's (COpenBLAS). */

/// Where each value of an image is, in floats: channel block `b`
/// (channels 8b…8b+7, consecutive), pixel (y, x) of image n is at
/// n·image + b·block + (y·width + x)·pixel.
typedef struct {
    long image;
    long block;
    long pixel;
} modelc_winograd_layout;

typedef struct {
    long batch;
    long height, width, inputs;
    long out_height, out_width, outputs;
    /// Rows and columns of padding before the image (the input row of output row r's first tap is r − pad_top).
    long pad_top, pad_left;
    modelc_winograd_layout input, output;
} modelc_winograd_geometry;

/// Whether this CPU runs the transforms (AVX2 and FMA).
int modelc_winograd_supported(void);

/// 2×2 output tiles of the whole batch.
long modelc_winograd_tiles(const modelc_winograd_geometry *geometry);

/// Transforms 3×3 weights `[outputs][inputs][3][3]` into the 16 matrices
/// `[16][inputs][outputs]` the products read.
void modelc_winograd_weights(const float *weights, long inputs, long outputs, float *transformed);

/// Floats of scratch one `modelc_winograd_run` call needs for `tiles` tiles of `channels` output channels.
long modelc_winograd_scratch_floats(const modelc_winograd_geometry *geometry, long tiles, long channels);

/// Computes tiles [first_tile, end_tile) of output channels
/// [first_channel, end_channel) (multiples of 8): the convolution, plus
/// `bias` (may be NULL), plus `residual` (in the output's layout, may be
/// NULL), clamped to [low, high]. Writes only those tiles' outputs of those
/// channels, so calls on disjoint ranges may run at once (each with its own
/// scratch).
void modelc_winograd_run(const modelc_winograd_geometry *geometry, const float *input, const float *transformed,
                         const float *bias, const float *residual, float low, float high, float *output,
                         long first_tile, long end_tile, long first_channel, long end_channel, float *scratch);

#endif
