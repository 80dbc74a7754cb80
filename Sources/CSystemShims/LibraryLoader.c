#include "CSystemShims.h"

#include <dlfcn.h>
#include <stdio.h>

int modelc_library_open(const char *library, const struct modelc_library_symbol *symbols, size_t count,
                        char *failure, size_t failure_size) {
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *reason = dlerror();
        snprintf(failure, failure_size, "%s", reason ? reason : library);
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        *symbols[i].slot = dlsym(handle, symbols[i].name);
        if (!*symbols[i].slot) {
            snprintf(failure, failure_size, "%s: no symbol %s", library, symbols[i].name);
            for (size_t j = 0; j < count; j++) *symbols[j].slot = NULL;
            return 0;
        }
    }
    return 1;
}
