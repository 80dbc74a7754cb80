#ifndef MODELC_CGRPC_H
#define MODELC_CGRPC_H
/* The gRPC server library (libModelcGRPC.so: grpc++ behind the C interface of
   CGRPCServer.h), opened with dlopen when `modelc serve` starts its gRPC port, so that no
   other command loads grpc. Each function is the library's of the same name without
   `serve_`; see CGRPCServer.h for what they do.

   The library is looked for at $MODELC_GRPC_LIBRARY when set, else next to the running
   executable, else on the loader's path (an installed modelc's lib/modelc/, its run path). */
#include <stddef.h>
#include <stdint.h>

struct modelc_grpc_server;
struct modelc_grpc_call;

struct modelc_grpc_configuration {
    const char *host;
    int port;
    const char *tls_certificate;
    const char *tls_key;
    size_t max_message_bytes;
    unsigned max_calls;
    void (*handler)(void *context, struct modelc_grpc_call *call);
    void (*logger)(void *context, const char *line);
    void *context;
};

/* Opens the library once per process (thread-safe). NULL on success, otherwise the
   loader's one-line reason. */
const char *modelc_serve_grpc_load(void);

/* NULL with the loader's reason in `failure` when the library cannot be opened. */
struct modelc_grpc_server *modelc_serve_grpc_start(const struct modelc_grpc_configuration *configuration, char *failure,
                                                   size_t failure_size, int *bind_failed);
int modelc_serve_grpc_port(const struct modelc_grpc_server *server);
long modelc_serve_grpc_calls_in_progress(const struct modelc_grpc_server *server);
void modelc_serve_grpc_shutdown(struct modelc_grpc_server *server, long grace_milliseconds);
void modelc_serve_grpc_stop(struct modelc_grpc_server *server);
const char *modelc_serve_grpc_call_method(const struct modelc_grpc_call *call);
const unsigned char *modelc_serve_grpc_call_message(const struct modelc_grpc_call *call, size_t *size);
const char *modelc_serve_grpc_call_metadata(const struct modelc_grpc_call *call, const char *key);
int64_t modelc_serve_grpc_call_deadline_nanoseconds(const struct modelc_grpc_call *call);
int modelc_serve_grpc_call_cancelled(const struct modelc_grpc_call *call);
void modelc_serve_grpc_call_finish(struct modelc_grpc_call *call, int code, const char *message,
                                   const unsigned char *response, size_t response_size);
/* NULL when the library cannot be opened. */
const char *modelc_serve_grpc_version(void);

#endif
