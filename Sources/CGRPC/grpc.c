#include "CGRPC.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <stdio.h>

static struct {
    struct modelc_grpc_server *(*start)(const struct modelc_grpc_configuration *, char *, size_t, int *);
    int (*port)(const struct modelc_grpc_server *);
    long (*calls_in_progress)(const struct modelc_grpc_server *);
    void (*shutdown)(struct modelc_grpc_server *, long);
    void (*stop)(struct modelc_grpc_server *);
    const char *(*call_method)(const struct modelc_grpc_call *);
    const unsigned char *(*call_message)(const struct modelc_grpc_call *, size_t *);
    const char *(*call_metadata)(const struct modelc_grpc_call *, const char *);
    int64_t (*call_deadline_nanoseconds)(const struct modelc_grpc_call *);
    int (*call_cancelled)(const struct modelc_grpc_call *);
    void (*call_finish)(struct modelc_grpc_call *, int, const char *, const unsigned char *, size_t);
    const char *(*version)(void);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[768];
static int loaded;

static const char library_name[] = "libModelcGRPC.so";

static void load(void) {
    static const struct modelc_library_symbol symbols[] = {
        {"modelc_grpc_start", (void **)&api.start},
        {"modelc_grpc_port", (void **)&api.port},
        {"modelc_grpc_calls_in_progress", (void **)&api.calls_in_progress},
        {"modelc_grpc_shutdown", (void **)&api.shutdown},
        {"modelc_grpc_stop", (void **)&api.stop},
        {"modelc_grpc_call_method", (void **)&api.call_method},
        {"modelc_grpc_call_message", (void **)&api.call_message},
        {"modelc_grpc_call_metadata", (void **)&api.call_metadata},
        {"modelc_grpc_call_deadline_nanoseconds", (void **)&api.call_deadline_nanoseconds},
        {"modelc_grpc_call_cancelled", (void **)&api.call_cancelled},
        {"modelc_grpc_call_finish", (void **)&api.call_finish},
        {"modelc_grpc_version", (void **)&api.version},
    };
    loaded = modelc_own_library_open(library_name, "MODELC_GRPC_LIBRARY", symbols, sizeof symbols / sizeof symbols[0],
                                     failure, sizeof failure);
}

const char *modelc_serve_grpc_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

struct modelc_grpc_server *modelc_serve_grpc_start(const struct modelc_grpc_configuration *configuration, char *reason,
                                                   size_t reason_size, int *bind_failed) {
    *bind_failed = 0;
    const char *problem = modelc_serve_grpc_load();
    if (problem) {
        snprintf(reason, reason_size, "%s", problem);
        return NULL;
    }
    return api.start(configuration, reason, reason_size, bind_failed);
}

/* The library is open once a server exists: the calls below need no check. */
int modelc_serve_grpc_port(const struct modelc_grpc_server *server) { return api.port(server); }
long modelc_serve_grpc_calls_in_progress(const struct modelc_grpc_server *server) { return api.calls_in_progress(server); }
void modelc_serve_grpc_shutdown(struct modelc_grpc_server *server, long grace) { api.shutdown(server, grace); }
void modelc_serve_grpc_stop(struct modelc_grpc_server *server) { api.stop(server); }
const char *modelc_serve_grpc_call_method(const struct modelc_grpc_call *call) { return api.call_method(call); }
const unsigned char *modelc_serve_grpc_call_message(const struct modelc_grpc_call *call, size_t *size) {
    return api.call_message(call, size);
}
const char *modelc_serve_grpc_call_metadata(const struct modelc_grpc_call *call, const char *key) {
    return api.call_metadata(call, key);
}
int64_t modelc_serve_grpc_call_deadline_nanoseconds(const struct modelc_grpc_call *call) {
    return api.call_deadline_nanoseconds(call);
}
int modelc_serve_grpc_call_cancelled(const struct modelc_grpc_call *call) { return api.call_cancelled(call); }
void modelc_serve_grpc_call_finish(struct modelc_grpc_call *call, int code, const char *message,
                                   const unsigned char *response, size_t response_size) {
    api.call_finish(call, code, message, response, response_size);
}
const char *modelc_serve_grpc_version(void) { return modelc_serve_grpc_load() ? NULL : api.version(); }
