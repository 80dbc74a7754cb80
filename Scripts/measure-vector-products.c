/* Measurement only, not part of modelc: a decode step's vector products (one input row) by int4
   weights per block of 32 with half-float scales ([out, in], an fp16 program's
   `linear_quantize_weights`) at the 200 M decoder's shapes, one thread, through
   modelc_packed_dot_rows: the input taken as integers where the CPU level allows
   (MODELC_MAX_CPU_ISA caps it), the float loops with NO_INTEGER=1.
   Each shape's weights are laid out in as many copies as make 96 MB, products walking through them,
   so that the codes come from memory as in a decode step (a 200M decoder's step reads 108 MB).
   The median over RUNS passes of the thread's CPU time per product is printed (µs; the machine is
   shared), with the codes' bytes per second.
     clang -O2 -ISources/CWeightKernels/include -ISources/CCPUFeatures/include -o /tmp/measure-vector \
       Scripts/measure-vector-products.c $(ls Sources/CWeightKernels/[a-z]*.c Sources/CCPUFeatures/[a-z]*.c) -lm
     for isa in avx512_vnni avx512 avx2; do MODELC_MAX_CPU_ISA=$isa /tmp/measure-vector; done */
#include "CWeightKernels.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RUNS 9

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void measure(const char *name, long rows, long columns, int integer) {
    const long code_bytes = rows * columns / 2, scale_count = rows * columns / 32;
    long copies = (96L << 20) / code_bytes;
    if (copies < 1) copies = 1;
    uint8_t *codes = malloc((size_t)(code_bytes * copies));
    uint16_t *scales = malloc((size_t)(scale_count * copies) * sizeof(uint16_t));
    float *x = malloc((size_t)columns * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
    for (long i = 0; i < code_bytes * copies; i++) codes[i] = (uint8_t)((uint32_t)i * 2654435761u >> 13);
    // Half floats between 2^-7 and 2^-6.
    for (long i = 0; i < scale_count * copies; i++) scales[i] = (uint16_t)(0x2000 + i % 1024);
    for (long i = 0; i < columns; i++) x[i] = (float)((i * 37) % 101) * 0.01f - 0.5f;
    modelc_packed_matrix m = {.rows = rows, .columns = columns, .bits = 4, .is_signed = 1, .block_rows = 1, .block_columns = 32,
                              .round_to_half = 1, .quantize_inputs = integer};
    double times[RUNS];
    for (int run = -1; run < RUNS; run++) {
        const double start = thread_seconds();
        for (long copy = 0; copy < copies; copy++) {
            m.codes = codes + copy * code_bytes;
            m.scale_halves = scales + copy * scale_count;
            modelc_packed_dot_rows(&m, x, y, 0, rows);
        }
        if (run >= 0) times[run] = (thread_seconds() - start) / (double)copies;
    }
    qsort(times, RUNS, sizeof(double), compare);
    const double median = times[RUNS / 2];
    printf("%-22s %5ld x %5ld  %8.1f us  %6.2f GB/s of codes  (y[1] %.4f)\n", name, rows, columns, median * 1e6,
           (double)code_bytes / median / 1e9, y[1]);
    free(codes);
    free(scales);
    free(x);
    free(y);
}

int main(void) {
    const int integer = getenv("NO_INTEGER") == NULL;
    printf("%s inputs, level capped by MODELC_MAX_CPU_ISA=%s\n", integer ? "integer" : "float",
           getenv("MODELC_MAX_CPU_ISA") ? getenv("MODELC_MAX_CPU_ISA") : "(none)");
    measure("query, output", 1024, 1024, integer);
    measure("key, value", 256, 1024, integer);
    measure("gate, up", 2816, 1024, integer);
    measure("down", 1024, 2816, integer);
    measure("logits", 32000, 1024, integer);
    return 0;
}
