#include "COpenBLAS.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <stdio.h>

typedef void (*Sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float,
                      const float *, int, const float *, int, float, float *, int);
typedef void (*Dgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, double,
                      const double *, int, const double *, int, double, double *, int);

typedef void (*Sgemv)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, int, int, float, const float *, int, const float *, int, float,
                      float *, int);

/* OpenBLAS's entry points, looked up once by load(). */
static struct {
    Sgemm sgemm;
    Dgemm dgemm;
    Sgemv sgemv;
    void (*set_num_threads)(int);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

static void load(void) {
    const struct modelc_library_symbol symbols[] = {
        {"cblas_sgemm", (void **)&api.sgemm},
        {"cblas_dgemm", (void **)&api.dgemm},
        {"cblas_sgemv", (void **)&api.sgemv},
        {"openblas_set_num_threads", (void **)&api.set_num_threads},
    };
    loaded = modelc_library_open("libopenblas.so.0", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

/* pthread_once also orders the reads of api after load() wrote it. */
const char *modelc_blas_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

void modelc_blas_set_num_threads(int threads) {
    if (!modelc_blas_load()) api.set_num_threads(threads);
}

/* The fallback: C = alpha · op(A) · op(B) + beta · C in plain loops, row-major
   (a column-major product is the row-major one of the transposes, swapped). */
#define PLAIN_GEMM(name, T)                                                                         \
    static void name(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB, \
                     int m, int n, int k, T alpha, const T *a, int lda, const T *b, int ldb, T beta,   \
                     T *c, int ldc) {                                                               \
        if (order == CblasColMajor) {                                                               \
            name(CblasRowMajor, transB, transA, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);      \
            return;                                                                                 \
        }                                                                                           \
        for (int i = 0; i < m; i++) {                                                               \
            for (int j = 0; j < n; j++) {                                                           \
                T sum = 0;                                                                          \
                for (int p = 0; p < k; p++) {                                                       \
                    T x = transA == CblasNoTrans ? a[(long)i * lda + p] : a[(long)p * lda + i];     \
                    T y = transB == CblasNoTrans ? b[(long)p * ldb + j] : b[(long)j * ldb + p];     \
                    sum += x * y;                                                                   \
                }                                                                                   \
                T *out = &c[(long)i * ldc + j];                                                     \
                *out = alpha * sum + (beta == 0 ? 0 : beta * *out);                                 \
            }                                                                                       \
        }                                                                                           \
    }
PLAIN_GEMM(plain_sgemm, float)
PLAIN_GEMM(plain_dgemm, double)

void modelc_blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB,
                       int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                       float beta, float *c, int ldc) {
    if (!modelc_blas_load())
        api.sgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        plain_sgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void modelc_blas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB,
                       int m, int n, int k, double alpha, const double *a, int lda, const double *b, int ldb,
                       double beta, double *c, int ldc) {
    if (!modelc_blas_load())
        api.dgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        plain_dgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The fallback: y = alpha · op(A) · x + beta · y in plain loops; A is m × n as laid out by order. */
static void plain_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans, int m, int n, float alpha, const float *a,
                        int lda, const float *x, int incx, float beta, float *y, int incy) {
    /* Column-major A is row-major Aᵀ. */
    int transposed = (trans == CblasTrans) != (order == CblasColMajor);
    int rows = order == CblasRowMajor ? m : n, columns = order == CblasRowMajor ? n : m;
    int outputs = transposed ? columns : rows, depth = transposed ? rows : columns;
    for (int i = 0; i < outputs; i++) {
        float sum = 0;
        for (int p = 0; p < depth; p++) {
            float element = transposed ? a[(long)p * lda + i] : a[(long)i * lda + p];
            sum += element * x[(long)p * incx];
        }
        float *out = &y[(long)i * incy];
        *out = alpha * sum + (beta == 0 ? 0 : beta * *out);
    }
}

void modelc_blas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans, int m, int n, float alpha, const float *a, int lda,
                       const float *x, int incx, float beta, float *y, int incy) {
    if (!modelc_blas_load())
        api.sgemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
    else
        plain_sgemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
