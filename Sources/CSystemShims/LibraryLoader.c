#include "CSystemShims.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int modelc_own_library_open(const char *name, const char *variable, const struct modelc_library_symbol *symbols,
                            size_t count, char *failure, size_t failure_size) {
    const char *configured = getenv(variable);
    if (configured && *configured) return modelc_library_open(configured, symbols, count, failure, failure_size);
    char path[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
    if (length > 0) {
        path[length] = 0;
        char *slash = strrchr(path, '/');
        if (slash && (size_t)(slash - path) + 1 + strlen(name) + 1 <= sizeof path) {
            strcpy(slash + 1, name);
            if (access(path, F_OK) == 0) return modelc_library_open(path, symbols, count, failure, failure_size);
        }
    }
    return modelc_library_open(name, symbols, count, failure, failure_size);
}
