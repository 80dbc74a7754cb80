// OpenBLAS (Debian libopenblas-dev): matrix products the network runtime
// runs outside XNNPACK (batched matmul, dot products).
#include <cblas.h>
