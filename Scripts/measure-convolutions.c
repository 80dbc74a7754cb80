/* Measurement only, not part of modelc: every convolution of a MobileNetV2
   (224×224, width 1.0) on oneDNN (channel-last, weights reordered once, ReLU6
   fused), one thread, and its 1×1 convolutions as the runtime ran them before
   oneDNN (bias copied into the output, OpenBLAS sgemm, then a clamp). Each
   layer is run 200 times after 10 warm-up runs; times are per run, totals
   weighted by how often MobileNetV2 has the layer. The numbers are in
   docs/measurements/2026-12-01-convolution-libraries.md, the decision in
   docs/runtime.md ("Convolutions and pooling", "Why oneDNN").
     gcc -O3 -march=native -o /tmp/measure-convolutions Scripts/measure-convolutions.c -ldnnl -lopenblas
     OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /tmp/measure-convolutions */
#include <cblas.h>
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call) do { dnnl_status_t status_ = (call); \
    if (status_ != dnnl_success) { fprintf(stderr, "%s failed: %d\n", #call, status_); exit(1); } } while (0)
#define RUNS 200

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

/* height, width, input channels, output channels, kernel, stride, groups, occurrences */
typedef struct { int h, w, in, out, k, s, g, n; } Layer;

static const Layer layers[] = {
    {224, 224, 3, 32, 3, 2, 1, 1},
    {112, 112, 32, 32, 3, 1, 32, 1}, {112, 112, 32, 16, 1, 1, 1, 1}, {112, 112, 16, 96, 1, 1, 1, 1},
    {112, 112, 96, 96, 3, 2, 96, 1}, {56, 56, 96, 24, 1, 1, 1, 1}, {56, 56, 24, 144, 1, 1, 1, 2},
    {56, 56, 144, 144, 3, 1, 144, 1}, {56, 56, 144, 24, 1, 1, 1, 1}, {56, 56, 144, 144, 3, 2, 144, 1},
    {28, 28, 144, 32, 1, 1, 1, 1}, {28, 28, 32, 192, 1, 1, 1, 3}, {28, 28, 192, 192, 3, 1, 192, 2},
    {28, 28, 192, 32, 1, 1, 1, 2}, {28, 28, 192, 192, 3, 2, 192, 1}, {14, 14, 192, 64, 1, 1, 1, 1},
    {14, 14, 64, 384, 1, 1, 1, 4}, {14, 14, 384, 384, 3, 1, 384, 4}, {14, 14, 384, 64, 1, 1, 1, 3},
    {14, 14, 384, 96, 1, 1, 1, 1}, {14, 14, 96, 576, 1, 1, 1, 3}, {14, 14, 576, 576, 3, 1, 576, 2},
    {14, 14, 576, 96, 1, 1, 1, 2}, {14, 14, 576, 576, 3, 2, 576, 1}, {7, 7, 576, 160, 1, 1, 1, 1},
    {7, 7, 160, 960, 1, 1, 1, 3}, {7, 7, 960, 960, 3, 1, 960, 3}, {7, 7, 960, 160, 1, 1, 1, 2},
    {7, 7, 960, 320, 1, 1, 1, 1}, {7, 7, 320, 1280, 1, 1, 1, 1},
};

static dnnl_memory_desc_t describe(int count, const dnnl_dims_t dims, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t descriptor;
    CHECK(dnnl_memory_desc_init_by_tag(&descriptor, count, dims, dnnl_f32, tag));
    return descriptor;
}

/* One layer on oneDNN: ms per run, and the implementation oneDNN chose. */
static double onednn(dnnl_engine_t engine, dnnl_stream_t stream, Layer l, float *src, float *dst, float *weights,
                     float *bias, const char **implementation) {
    int pad = l.k / 2, oh = (l.h + 2 * pad - l.k) / l.s + 1, ow = (l.w + 2 * pad - l.k) / l.s + 1;
    dnnl_dims_t source_dims = {1, l.in, l.h, l.w}, destination_dims = {1, l.out, oh, ow}, bias_dims = {l.out};
    dnnl_memory_desc_t source = describe(4, source_dims, dnnl_nhwc), destination = describe(4, destination_dims, dnnl_nhwc);
    dnnl_memory_desc_t bias_md = describe(1, bias_dims, dnnl_a), any, given;
    if (l.g > 1) {
        dnnl_dims_t dims = {l.g, l.out / l.g, l.in / l.g, l.k, l.k};
        any = describe(5, dims, dnnl_format_tag_any);
        given = describe(5, dims, dnnl_gohwi);
    } else {
        dnnl_dims_t dims = {l.out, l.in, l.k, l.k};
        any = describe(4, dims, dnnl_format_tag_any);
        given = describe(4, dims, dnnl_ohwi);
    }
    dnnl_dims_t strides = {l.s, l.s}, padding = {pad, pad};
    dnnl_convolution_desc_t convolution;
    CHECK(dnnl_convolution_forward_desc_init(&convolution, dnnl_forward_inference, dnnl_convolution_direct, &source, &any,
                                             &bias_md, &destination, strides, padding, padding));
    dnnl_primitive_attr_t attributes;
    dnnl_post_ops_t post_ops;
    CHECK(dnnl_primitive_attr_create(&attributes));
    CHECK(dnnl_post_ops_create(&post_ops));
    CHECK(dnnl_post_ops_append_eltwise(post_ops, 1.0f, dnnl_eltwise_clip, 0.0f, 6.0f));
    CHECK(dnnl_primitive_attr_set_post_ops(attributes, post_ops));
    dnnl_primitive_desc_t description;
    CHECK(dnnl_primitive_desc_create(&description, &convolution, attributes, engine, NULL));
    CHECK(dnnl_primitive_desc_query(description, dnnl_query_impl_info_str, 0, implementation));
    const dnnl_memory_desc_t *wanted = dnnl_primitive_desc_query_md(description, dnnl_query_weights_md, 0);

    dnnl_memory_t source_memory, destination_memory, bias_memory, given_memory, weights_memory;
    CHECK(dnnl_memory_create(&source_memory, &source, engine, src));
    CHECK(dnnl_memory_create(&destination_memory, &destination, engine, dst));
    CHECK(dnnl_memory_create(&bias_memory, &bias_md, engine, bias));
    CHECK(dnnl_memory_create(&given_memory, &given, engine, weights));
    CHECK(dnnl_memory_create(&weights_memory, wanted, engine, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t reorder_description;
    dnnl_primitive_t reorder, primitive;
    CHECK(dnnl_reorder_primitive_desc_create(&reorder_description, &given, engine, wanted, engine, NULL));
    CHECK(dnnl_primitive_create(&reorder, reorder_description));
    dnnl_exec_arg_t reorder_arguments[2] = {{DNNL_ARG_FROM, given_memory}, {DNNL_ARG_TO, weights_memory}};
    CHECK(dnnl_primitive_execute(reorder, stream, 2, reorder_arguments));
    CHECK(dnnl_stream_wait(stream));

    CHECK(dnnl_primitive_create(&primitive, description));
    dnnl_exec_arg_t arguments[4] = {{DNNL_ARG_SRC, source_memory}, {DNNL_ARG_WEIGHTS, weights_memory},
                                    {DNNL_ARG_BIAS, bias_memory}, {DNNL_ARG_DST, destination_memory}};
    for (int run = 0; run < 10; run++) CHECK(dnnl_primitive_execute(primitive, stream, 4, arguments));
    double start = now();
    for (int run = 0; run < RUNS; run++) CHECK(dnnl_primitive_execute(primitive, stream, 4, arguments));
    CHECK(dnnl_stream_wait(stream));
    return (now() - start) / RUNS * 1000;
}

/* A 1×1 layer as the runtime ran it on OpenBLAS: ms per run. */
static double openblas(Layer l, const float *src, float *dst, const float *weights, const float *bias) {
    int pixels = l.h * l.w;
    size_t count = (size_t)pixels * l.out;
    double start = now();
    for (int run = 0; run < RUNS; run++) {
        for (int pixel = 0; pixel < pixels; pixel++) memcpy(dst + (size_t)pixel * l.out, bias, l.out * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, pixels, l.out, l.in, 1, src, l.in, weights, l.in, 1, dst, l.out);
        for (size_t i = 0; i < count; i++) dst[i] = dst[i] < 0 ? 0 : dst[i] > 6 ? 6 : dst[i];
    }
    return (now() - start) / RUNS * 1000;
}

int main(void) {
    const dnnl_version_t *version = dnnl_version();
    printf("oneDNN %d.%d.%d\n", version->major, version->minor, version->patch);
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    double total_onednn = 0, total_pointwise_onednn = 0, total_pointwise_openblas = 0;
    for (size_t index = 0; index < sizeof layers / sizeof layers[0]; index++) {
        Layer l = layers[index];
        int pad = l.k / 2, oh = (l.h + 2 * pad - l.k) / l.s + 1, ow = (l.w + 2 * pad - l.k) / l.s + 1;
        size_t source_count = (size_t)l.h * l.w * l.in, destination_count = (size_t)oh * ow * l.out;
        size_t weight_count = (size_t)l.out * (l.in / l.g) * l.k * l.k;
        float *src = aligned_alloc(64, source_count * 4 + 64), *dst = aligned_alloc(64, destination_count * 4 + 64);
        float *weights = malloc(weight_count * 4), *bias = malloc(l.out * 4);
        for (size_t i = 0; i < source_count; i++) src[i] = (i % 7) * 0.1f;
        for (size_t i = 0; i < weight_count; i++) weights[i] = ((i * 13) % 11) * 0.01f;
        for (int i = 0; i < l.out; i++) bias[i] = 0.1f;
        const char *implementation;
        double ms = onednn(engine, stream, l, src, dst, weights, bias, &implementation);
        total_onednn += ms * l.n;
        printf("%3dx%3dx%4d -> %4d  %dx%d/%d groups %4d  x%d  oneDNN %.3f ms (%s)", l.h, l.w, l.in, l.out, l.k, l.k, l.s, l.g,
               l.n, ms, implementation);
        if (l.k == 1) {
            double blas = openblas(l, src, dst, weights, bias);
            total_pointwise_onednn += ms * l.n;
            total_pointwise_openblas += blas * l.n;
            printf("  OpenBLAS %.3f ms", blas);
        }
        printf("\n");
        free(src), free(dst), free(weights), free(bias);
    }
    printf("every convolution on oneDNN: %.2f ms; 1x1 ones: oneDNN %.2f ms, OpenBLAS %.2f ms\n", total_onednn,
           total_pointwise_onednn, total_pointwise_openblas);
    return 0;
}
