#ifndef MODELC_COPENBLAS_H
#define MODELC_COPENBLAS_H
/* OpenBLAS (Debian libopenblas0): matrix products the network runtime runs
   outside XNNPACK (batched matmul, dot products) and training's logistic
   regression. Opened with dlopen at the first product rather than linked:
   OpenBLAS starts its thread pool when loaded, and commands that multiply no
   matrices (compile, fetch, validate, …) do not load it, nor libgfortran.

   Declared here from the CBLAS ABI (32-bit integers, as Debian builds it);
   the cblas_* names are static inline, so nothing named cblas_* is exported
   to clash with a real CBLAS. When libopenblas.so.0 cannot be loaded, the
   products run in plain loops (correct, slow). */

typedef enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_ORDER;
typedef enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 } CBLAS_TRANSPOSE;

void modelc_blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB,
                       int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                       float beta, float *c, int ldc);
void modelc_blas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB,
                       int m, int n, int k, double alpha, const double *a, int lda, const double *b, int ldb,
                       double beta, double *c, int ldc);
void modelc_blas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans, int m, int n, float alpha, const float *a, int lda,
                       const float *x, int incx, float beta, float *y, int incy);
/* openblas_set_num_threads; loads OpenBLAS. Nothing without it. */
void modelc_blas_set_num_threads(int threads);
/* NULL when OpenBLAS is loaded (loading it if needed), otherwise why not. */
const char *modelc_blas_load(void);

static inline void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE transA,
                               const enum CBLAS_TRANSPOSE transB, const int m, const int n, const int k,
                               const float alpha, const float *a, const int lda, const float *b, const int ldb,
                               const float beta, float *c, const int ldc) {
    modelc_blas_sgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static inline void cblas_dgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE transA,
                               const enum CBLAS_TRANSPOSE transB, const int m, const int n, const int k,
                               const double alpha, const double *a, const int lda, const double *b, const int ldb,
                               const double beta, double *c, const int ldc) {
    modelc_blas_dgemm(order, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static inline void cblas_sgemv(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans, const int m, const int n,
                               const float alpha, const float *a, const int lda, const float *x, const int incx,
                               const float beta, float *y, const int incy) {
    modelc_blas_sgemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}
static inline void openblas_set_num_threads(int threads) {
    modelc_blas_set_num_threads(threads);
}
#endif
