/* Measurement only, not part of modelc: a prefill's products (128 input rows) by int4 weights
   per block of 32 ([out, in], an fp16 program's `linear_quantize_weights`) at the 200 M decoder's
   shapes, one thread, the ways issue 36 weighed:
     float64  widen 64 weight rows to floats (modelc_packed_decode_block), OpenBLAS cblas_sgemm
              (its kernels: whatever OPENBLAS_CORETYPE picks, Haswell or SkylakeX)
     dnnl T   the same tiles of T rows on oneDNN's dnnl_sgemm
     integer  the input rounded to 16-bit integers per block of 32, 64 weight rows unpacked to
              16-bit pairs, integer pair products (modelc_packed_multiply_integer; the CPU level
              capped by MODELC_MAX_CPU_ISA)
   Each product runs 2 times to warm up, then RUNS times; the median of the thread's CPU time is printed
   (ms; the machine is shared) with GFLOP/s.
   The integer product's worst error beyond its bound (max|x| / 65024 per input, 2^-11 of each
   weight for the fp16 rounding it skips) is printed relative to Σ|terms| for a few outputs.
     clang -O2 -ISources/CWeightKernels/include -ISources/CCPUFeatures/include -o /tmp/measure-prefill \
       Scripts/measure-prefill-products.c $(ls Sources/CWeightKernels/[a-z]*.c Sources/CCPUFeatures/[a-z]*.c) -ldnnl -lopenblas -lm
     export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
     for isa in avx512_vnni avx512 avx2; do MODELC_MAX_CPU_ISA=$isa OPENBLAS_CORETYPE=Haswell /tmp/measure-prefill; done
     OPENBLAS_CORETYPE=SkylakeX /tmp/measure-prefill */
#include "CWeightKernels.h"

#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7
#define ROWS 128

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static unsigned state = 12345;
static unsigned next(void) { return state = state * 1664525u + 1013904223u; }
static float uniform(void) { return (float)(next() >> 8) / (float)(1 << 24); }

typedef struct {
    const char *name;
    long k, n;
} Shape;

static const Shape shapes[] = {
    {"k/v 1024→256", 1024, 256},   {"q/o 1024→1024", 1024, 1024}, {"gate/up 1024→2816", 1024, 2816},
    {"down 2816→1024", 2816, 1024}, {"lm_head 1024→32000", 1024, 32000},
};

typedef enum { FLOAT_TILES, DNNL_TILES, INTEGER } Method;

static float *tile, *y;
static void *rounded, *buffer;

static void product(Method method, long tile_rows, const modelc_packed_matrix *m, const float *x) {
    const long k = m->columns, n = m->rows;
    if (method == INTEGER) {
        if (!modelc_round_rows(x, ROWS, k, rounded)) abort();
        modelc_packed_multiply_integer(m, rounded, ROWS, y, n, 0, n, buffer);
        return;
    }
    for (long j = 0; j < n; j += tile_rows) {
        const long width = n - j < tile_rows ? n - j : tile_rows;
        modelc_packed_decode_block(m, j, width, 0, k, tile, k);
        if (method == FLOAT_TILES) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ROWS, (int)width, (int)k, 1, x, (int)k, tile, (int)k, 0, y + j, (int)n);
        } else {
            dnnl_sgemm('N', 'T', ROWS, width, k, 1, x, k, tile, k, 0, y + j, n);
        }
    }
}

static double measure(Method method, long tile_rows, const modelc_packed_matrix *m, const float *x) {
    double times[RUNS];
    for (int i = 0; i < 2; i++) product(method, tile_rows, m, x);
    for (int i = 0; i < RUNS; i++) {
        double start = now();
        product(method, tile_rows, m, x);
        times[i] = now() - start;
    }
    qsort(times, RUNS, sizeof times[0], compare);
    return times[RUNS / 2] * 1e3;
}

/// The integer product's worst error beyond its bound over a few outputs, relative to Σ|terms|.
static double integer_error(const modelc_packed_matrix *m, const float *x, const float *weights) {
    const long k = m->columns, n = m->rows;
    product(INTEGER, 0, m, x);
    double worst = 0;
    for (long i = 0; i < ROWS; i += 13) {
        for (long j = 0; j < n; j += n / 7 + 1) {
            double sum = 0, size = 0, allowance = 0;
            for (long c = 0; c < k; c++) {
                double w = weights[j * k + c];
                sum += (double)x[i * k + c] * w;
                size += fabs((double)x[i * k + c] * w);
                if (c % 32 == 0) {
                    double most = 0;
                    for (long e = c; e < c + 32; e++) most = fmax(most, fabs(x[i * k + e]));
                    for (long e = c; e < c + 32; e++) allowance += most / 65024 * fabs(weights[j * k + e]);
                }
                allowance += fabs((double)x[i * k + c] * w) * 0x1p-11;
            }
            double error = fmax(0, fabs(y[i * n + j] - sum) - allowance) / (1e-6 + size);
            if (error > worst) worst = error;
        }
    }
    return worst;
}

int main(void) {
    const char *core = getenv("OPENBLAS_CORETYPE"), *isa = getenv("MODELC_MAX_CPU_ISA");
    printf("OPENBLAS_CORETYPE=%s MODELC_MAX_CPU_ISA=%s (level %d), %d rows, median of %d, ms (GFLOP/s)\n", core ? core : "-", isa ? isa : "-",
           modelc_cpu_level(), ROWS, RUNS);
    printf("%-20s %16s %16s %16s %16s %12s\n", "shape", "float 64", "dnnl 64", "dnnl 256", "integer", "int error");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const long k = shapes[s].k, n = shapes[s].n, blocks = n * (k / 32);
        uint8_t *codes = malloc((size_t)(n * k / 2));
        float *scale = malloc((size_t)blocks * sizeof(float)), *x = malloc((size_t)(ROWS * k) * sizeof(float));
        for (long i = 0; i < n * k / 2; i++) codes[i] = (uint8_t)(next() >> 24);
        for (long i = 0; i < blocks; i++) scale[i] = (float)(_Float16)(0.002f + 0.01f * uniform());
        // Activations with a few large channels, as a decoder's are.
        for (long i = 0; i < ROWS * k; i++) x[i] = (uniform() - 0.5f) * ((i % k) % 97 == 0 ? 20.0f : 1.0f);
        modelc_packed_matrix m = {.codes = codes, .rows = n, .columns = k, .bits = 4, .is_signed = 1, .scale = scale, .block_rows = 1,
                                  .block_columns = 32, .round_to_half = 1, .quantize_inputs = 1};
        tile = malloc((size_t)(256 * k) * sizeof(float));
        y = malloc((size_t)(ROWS * n) * sizeof(float));
        rounded = malloc((size_t)modelc_rounded_rows_bytes(ROWS, k));
        buffer = aligned_alloc(64, ((size_t)modelc_packed_multiply_buffer_bytes(&m) + 63) / 64 * 64);
        float *weights = malloc((size_t)(n * k) * sizeof(float));
        modelc_packed_decode_block(&m, 0, n, 0, k, weights, k);
        const double flops = 2.0 * ROWS * n * k / 1e9;
        double t[4] = {measure(FLOAT_TILES, 64, &m, x), measure(DNNL_TILES, 64, &m, x), measure(DNNL_TILES, 256, &m, x), 0};
        double error = -1;
        if (modelc_packed_multiply_quantize_inputs(&m)) {
            t[3] = measure(INTEGER, 0, &m, x);
            error = integer_error(&m, x, weights);
        }
        printf("%-20s", shapes[s].name);
        for (int i = 0; i < 4; i++) printf(" %7.2f (%5.0f)", t[i], t[i] > 0 ? flops / (t[i] / 1e3) : 0);
        printf(" %12.2g\n", error);
        free(codes), free(scale), free(x), free(tile), free(y), free(rounded), free(buffer), free(weights);
    }
    return 0;
}
