// Which vector instructions modelc's own C kernels may use: read once from
// the CPU, capped by MODELC_MAX_CPU_ISA so that the narrower paths can be
// run (and tested) on a machine with wider ones.
#include "CCPUFeatures.h"

#include <stdlib.h>
#include <string.h>

static int detected_level(void) {
#if defined(__x86_64__) && defined(__clang__)
    __builtin_cpu_init();
    int level = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) level = 2;
    if (level == 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) level = 3;
    if (level == 3 && __builtin_cpu_supports("avx512vnni")) level = 4;
    return level;
#else
    return 0;
#endif
}

static int capped_level(int level) {
    const char *cap = getenv("MODELC_MAX_CPU_ISA");
    if (cap == NULL || *cap == 0) return level;
    int most = level;
    if (strcmp(cap, "generic") == 0 || strcmp(cap, "sse2") == 0) most = 0;
    else if (strcmp(cap, "avx2") == 0) most = 2;
    else if (strcmp(cap, "avx512") == 0) most = 3;
    else if (strcmp(cap, "avx512_vnni") == 0) most = 4;
    return level < most ? level : most;
}

int modelc_cpu_level(void) {
    static int level = -1;
    int known = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (known < 0) {
        known = capped_level(detected_level());
        __atomic_store_n(&level, known, __ATOMIC_RELAXED);
    }
    return known;
}

